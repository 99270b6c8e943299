package api

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/rules"
)

// query is a request's query string, checked against the parameters a
// route knows. Every error is EINVALID naming the parameter.
type query struct {
	v url.Values
}

// parseQuery parses r's query string and rejects parameters not in known.
func parseQuery(r *http.Request, known ...string) (query, error) {
	v, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return query{}, quarantine.FieldErrorf(quarantine.EINVALID, "query", "the query string is malformed: %s", quarantine.Clip(err.Error()))
	}
	names := make([]string, 0, len(v))
	for k := range v {
		names = append(names, k)
	}
	slices.Sort(names) // report the same parameter every time
	for _, k := range names {
		if !slices.Contains(known, k) {
			return query{}, quarantine.FieldErrorf(quarantine.EINVALID, quarantine.Clip(k), "unknown query parameter %q", quarantine.Clip(k))
		}
	}
	return query{v: v}, nil
}

// all returns every value of name.
func (q query) all(name string) []string { return q.v[name] }

// one returns the single value of name ("" when absent).
func (q query) one(name string) (string, error) { return rules.OneValue(q.v, name) }

// time parses name as an RFC 3339 time (zero when absent).
func (q query) time(name string) (time.Time, error) {
	s, err := q.one(name)
	if err != nil || s == "" {
		return time.Time{}, err
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, quarantine.FieldErrorf(quarantine.EINVALID, name, "%s must be an RFC 3339 time, like 2026-01-02T15:04:05Z", name)
	}
	return t.UTC(), nil
}

// int parses name as an integer in [min, max] (0 when absent): decimal
// digits with an optional leading minus. Given empty ("limit=") or with a
// plus sign it is refused like any other malformed value.
func (q query) int(name string, min, max int64) (int64, error) {
	s, err := q.one(name)
	if err != nil {
		return 0, err
	}
	if _, given := q.v[name]; !given {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || s == "" || s[0] == '+' || n < min || n > max {
		return 0, quarantine.FieldErrorf(quarantine.EINVALID, name, "%s must be an integer between %d and %d", name, min, max)
	}
	return n, nil
}

// limit parses the page size; absent gives the default.
func (q query) limit() (int, error) {
	n, err := q.int("limit", 1, quarantine.MaxLimit)
	if err != nil || n == 0 {
		return quarantine.DefaultLimit, err
	}
	return int(n), nil
}

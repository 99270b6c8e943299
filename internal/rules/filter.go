package rules

import (
	"errors"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// filterParams name a message filter, as query parameters and as the
// members of a body's "filter" object.
var filterParams = []string{"queue", "job_name", "failure_class", "status", "owner", "source", "idempotency_key",
	"fingerprint", "failed_after", "failed_before", "older_than", "q"}

// maxAge bounds older_than: a hundred years.
const maxAge = 100 * 365 * 24 * time.Hour

// FilterInput is a message filter as a request gives it (query
// parameters, a body's "filter" object, a form), before parsing.
type FilterInput struct {
	Queue          []string `json:"queue"`
	JobName        []string `json:"job_name"`
	FailureClass   []string `json:"failure_class"`
	Status         []string `json:"status"`
	Owner          []string `json:"owner"`
	Source         []string `json:"source"`
	IdempotencyKey []string `json:"idempotency_key"`
	Fingerprint    []string `json:"fingerprint"`
	FailedAfter    string   `json:"failed_after"`
	FailedBefore   string   `json:"failed_before"`
	OlderThan      string   `json:"older_than"`
	Q              string   `json:"q"`
}

// FilterParams returns the names of the message filter's parameters
// (queue, job_name, …, q), as GET /api/v1/messages takes them.
func FilterParams() []string { return slices.Clone(filterParams) }

// FilterInputFromValues reads the filter parameters of v (the others are
// ignored): lists may repeat, the others are single (EINVALID naming the
// parameter otherwise).
func FilterInputFromValues(v url.Values) (FilterInput, error) {
	in := FilterInput{
		Queue: v["queue"], JobName: v["job_name"], FailureClass: v["failure_class"],
		Status: v["status"], Owner: v["owner"], Source: v["source"],
		IdempotencyKey: v["idempotency_key"], Fingerprint: v["fingerprint"],
	}
	for _, p := range []struct {
		name string
		dst  *string
	}{{"failed_after", &in.FailedAfter}, {"failed_before", &in.FailedBefore}, {"older_than", &in.OlderThan}, {"q", &in.Q}} {
		s, err := OneValue(v, p.name)
		if err != nil {
			return in, err
		}
		*p.dst = s
	}
	return in, nil
}

// OneValue returns the single value of parameter name in v ("" when
// absent; EINVALID naming it when it is given more than once).
func OneValue(v url.Values, name string) (string, error) {
	vs := v[name]
	if len(vs) > 1 {
		return "", quarantine.FieldErrorf(quarantine.EINVALID, name, "%s may be given once", name)
	}
	if len(vs) == 0 {
		return "", nil
	}
	return vs[0], nil
}

// FilterFromValues parses the message filter parameters of v, named as on
// the API (FilterParams; other parameters are ignored), older_than
// counting back from now; empty reports whether the filter selects every
// message. Errors are EINVALID naming the parameter.
func FilterFromValues(v url.Values, now time.Time) (f quarantine.Filter, empty bool, err error) {
	in, err := FilterInputFromValues(v)
	if err != nil {
		return f, false, err
	}
	f, err = in.Filter(now, "")
	return f, in.Empty(), err
}

// Empty reports whether in selects every message.
func (in FilterInput) Empty() bool {
	return len(in.Queue)+len(in.JobName)+len(in.FailureClass)+len(in.Status)+len(in.Owner)+len(in.Source)+
		len(in.IdempotencyKey)+len(in.Fingerprint) == 0 && in.FailedAfter == "" && in.FailedBefore == "" && in.OlderThan == "" && in.Q == ""
}

// Filter parses and validates in; older_than counts back from now. at
// prefixes the field of every error: "" for query parameters, "/filter/"
// for a body's filter.
func (in FilterInput) Filter(now time.Time, at string) (quarantine.Filter, error) {
	f := quarantine.Filter{Queue: in.Queue, JobName: in.JobName, Owner: in.Owner, Source: in.Source,
		IdempotencyKey: in.IdempotencyKey, Fingerprint: in.Fingerprint, Text: in.Q, Limit: 1}
	for _, l := range []struct {
		name string
		n    int
	}{{"queue", len(in.Queue)}, {"job_name", len(in.JobName)}, {"failure_class", len(in.FailureClass)},
		{"status", len(in.Status)}, {"owner", len(in.Owner)}, {"source", len(in.Source)}, {"idempotency_key", len(in.IdempotencyKey)},
		{"fingerprint", len(in.Fingerprint)}} {
		if l.n > quarantine.MaxFilterValues {
			return f, quarantine.FieldErrorf(quarantine.EINVALID, at+l.name, "at most %d values", quarantine.MaxFilterValues)
		}
	}
	for _, c := range in.FailureClass {
		f.FailureClass = append(f.FailureClass, quarantine.FailureClass(c))
	}
	for _, st := range in.Status {
		f.Status = append(f.Status, quarantine.Status(st))
	}
	var err error
	if f.FailedAfter, err = parseTime(at+"failed_after", in.FailedAfter); err != nil {
		return f, err
	}
	if f.FailedBefore, err = parseTime(at+"failed_before", in.FailedBefore); err != nil {
		return f, err
	}
	if in.OlderThan != "" {
		if in.FailedBefore != "" {
			return f, quarantine.FieldErrorf(quarantine.EINVALID, at+"older_than", "give failed_before or older_than, not both")
		}
		d, err := parseAge(in.OlderThan)
		if err != nil {
			return f, quarantine.FieldErrorf(quarantine.EINVALID, at+"older_than", "%s", quarantine.ErrorMessage(err))
		}
		f.FailedBefore = now.Add(-d).UTC()
	}
	if err := f.Validate(); err != nil {
		if at != "" { // a body's filter: name the element, /filter/status/1
			err = elementField(err, f)
		}
		return f, prefixField(err, at)
	}
	return f, nil
}

// elementField returns err, a refusal of f by f.Validate that names one
// of its lists, naming the first element of that list that the domain
// refuses alone ("status" becomes "status/1"). Errors about a list as a
// whole (too many values) are returned as they are.
func elementField(err error, f quarantine.Filter) error {
	var e *quarantine.Error
	if !errors.As(err, &e) || e.Field == "" {
		return err
	}
	lists := map[string][]string{"queue": f.Queue, "job_name": f.JobName, "owner": f.Owner, "source": f.Source,
		"idempotency_key": f.IdempotencyKey, "fingerprint": f.Fingerprint}
	for _, st := range f.Status {
		lists["status"] = append(lists["status"], string(st))
	}
	for _, c := range f.FailureClass {
		lists["failure_class"] = append(lists["failure_class"], string(c))
	}
	vals, ok := lists[e.Field]
	if !ok || len(vals) > quarantine.MaxFilterValues {
		return err
	}
	for i, v := range vals {
		one := quarantine.Filter{Limit: 1}
		switch e.Field {
		case "queue":
			one.Queue = []string{v}
		case "job_name":
			one.JobName = []string{v}
		case "owner":
			one.Owner = []string{v}
		case "source":
			one.Source = []string{v}
		case "idempotency_key":
			one.IdempotencyKey = []string{v}
		case "fingerprint":
			one.Fingerprint = []string{v}
		case "status":
			one.Status = []quarantine.Status{quarantine.Status(v)}
		case "failure_class":
			one.FailureClass = []quarantine.FailureClass{quarantine.FailureClass(v)}
		}
		if one.Validate() != nil {
			c := *e
			c.Field = e.Field + "/" + strconv.Itoa(i)
			return &c
		}
	}
	return err
}

// parseTime parses an RFC 3339 time ("" gives the zero time).
func parseTime(field, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, quarantine.FieldErrorf(quarantine.EINVALID, field, "%s must be an RFC 3339 time, like 2026-01-02T15:04:05Z", field)
	}
	return t.UTC(), nil
}

// parseAge parses a positive age: a Go duration (90s, 15m, 2h30m) or a
// whole number of days (7d), at most a hundred years.
func parseAge(s string) (time.Duration, error) {
	bad := quarantine.Errorf(quarantine.EINVALID, "an age is a positive duration like 15m, 2h or 7d, at most 36500d")
	d, err := quarantine.ParseDuration(s)
	if err != nil || d <= 0 || d > maxAge {
		return 0, bad
	}
	return d, nil
}

// prefixField returns err with at put before its field.
func prefixField(err error, at string) error {
	var e *quarantine.Error
	if at == "" || !errors.As(err, &e) || e.Field == "" {
		return err
	}
	c := *e
	c.Field = at + e.Field
	return &c
}

// Scope restricts f to the owners of t, when it has any (an owner asked
// for outside them is dropped). It returns false when f asked only for
// owners outside them: then nothing can match.
func Scope(t *quarantine.Token, f *quarantine.Filter) bool {
	if len(t.Owners) == 0 {
		return true
	}
	f.Owner = scopeOwners(f.Owner, t.Owners)
	return len(f.Owner) > 0
}

// scopeOwners intersects the owners asked for with a token's owners; none
// asked for means all of the token's.
func scopeOwners(asked, allowed []string) []string {
	if len(asked) == 0 {
		return slices.Clone(allowed)
	}
	var out []string
	for _, o := range asked {
		if slices.Contains(allowed, o) && !slices.Contains(out, o) {
			out = append(out, o)
		}
	}
	return out
}

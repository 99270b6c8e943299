package api

import (
	"net/http"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/rules"
)

// filterFromBody decodes the "filter" member of a body; absent is the
// empty filter.
func filterFromBody(raw []byte) (rules.FilterInput, error) {
	var in rules.FilterInput
	if len(raw) == 0 || string(raw) == "null" {
		return in, nil
	}
	return in, decodeObject(raw, &in, "/filter")
}

// queryFilter reads the filter of a GET route that knows the filter
// parameters plus extra ones, and returns the parsed query too.
func (s *Server) queryFilter(r *http.Request, extra ...string) (quarantine.Filter, query, error) {
	q, err := parseQuery(r, append(rules.FilterParams(), extra...)...)
	if err != nil {
		return quarantine.Filter{}, q, err
	}
	in, err := rules.FilterInputFromValues(q.v)
	if err != nil {
		return quarantine.Filter{}, q, err
	}
	f, err := in.Filter(s.cfg.Now(), "")
	return f, q, err
}

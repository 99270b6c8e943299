package api

import (
	"encoding/json"
	"strconv"

	"github.com/quarantine-dev/quarantine"
)

// selection reads the ids or filter of a bulk action's body (discard,
// replay): not both; at most quarantine.MaxBulk ids, each a message id,
// repeats dropped (in linear time); a filter that selects every message
// only with expect_count. It returns the ids, or the filter (nil when the
// body has none).
func (s *Server) selection(ids []string, filter json.RawMessage, expect *int) ([]string, *quarantine.Filter, error) {
	hasFilter := len(filter) > 0 && string(filter) != "null"
	if ids != nil && hasFilter {
		return nil, nil, quarantine.FieldErrorf(quarantine.EINVALID, "/filter", "give ids or a filter, not both")
	}
	out, err := CleanIDs(ids)
	if err != nil {
		return nil, nil, err
	}
	if !hasFilter {
		return out, nil, nil
	}
	in, err := filterFromBody(filter)
	if err != nil {
		return nil, nil, err
	}
	if in.empty() && expect == nil {
		return nil, nil, quarantine.FieldErrorf(quarantine.EINVALID, "/filter",
			"an empty filter selects every message: narrow it, or confirm with expect_count")
	}
	f, err := in.filter(s.cfg.Now(), "/filter/")
	if err != nil {
		return nil, nil, err
	}
	return nil, &f, nil
}

// CleanIDs checks the ids of a bulk action (at most quarantine.MaxBulk,
// each a message id: EINVALID naming /ids or /ids/N otherwise) and drops
// repeats, in linear time.
func CleanIDs(ids []string) ([]string, error) {
	if len(ids) > quarantine.MaxBulk {
		return nil, quarantine.FieldErrorf(quarantine.EINVALID, "/ids", "at most %d ids at once", quarantine.MaxBulk)
	}
	var out []string
	seen := make(map[string]bool, len(ids))
	for i, id := range ids {
		if !quarantine.ValidID(id) {
			return nil, quarantine.FieldErrorf(quarantine.EINVALID, "/ids/"+strconv.Itoa(i), "%q is not a message id", clip(id))
		}
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out, nil
}

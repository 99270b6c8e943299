package api

import (
	"encoding/json"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/rules"
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
	out, err := rules.CleanIDs(ids)
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
	if in.Empty() && expect == nil {
		return nil, nil, quarantine.FieldErrorf(quarantine.EINVALID, "/filter",
			"an empty filter selects every message: narrow it, or confirm with expect_count")
	}
	f, err := in.Filter(s.cfg.Now(), "/filter/")
	if err != nil {
		return nil, nil, err
	}
	return nil, &f, nil
}

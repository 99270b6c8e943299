package api

import (
	"encoding/json"
	"net/http"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
	"github.com/quarantine-dev/quarantine/internal/rules"
)

// rekeyBody is the body of POST /api/v1/messages/rekey.
type rekeyBody struct {
	Filter        json.RawMessage `json:"filter"`
	DryRun        bool            `json:"dry_run"`
	ExpectChanged *int            `json:"expect_changed"`
	Reason        string          `json:"reason"`
}

// rekeyMessages applies the idempotency rules configured now to the
// stored messages of a filter, within the token's owners: with dry_run it
// only counts (would change, unchanged, still missing), else it changes
// them, one message.rekey audit event each. An empty filter (every
// message) needs expect_changed, as does any apply that is to hold to a
// previewed count.
func (s *Server) rekeyMessages(w http.ResponseWriter, r *http.Request) {
	var b rekeyBody
	if err := s.decodeBody(w, r, &b); err != nil {
		s.fail(w, r, err)
		return
	}
	if len(b.Filter) == 0 || string(b.Filter) == "null" {
		s.fail(w, r, quarantine.FieldErrorf(quarantine.EINVALID, "/filter", "give a filter (an empty one selects every message)"))
		return
	}
	if b.ExpectChanged != nil && *b.ExpectChanged < 0 {
		s.fail(w, r, quarantine.FieldErrorf(quarantine.EINVALID, "/expect_changed", "expect_changed must not be negative"))
		return
	}
	in, err := filterFromBody(b.Filter)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if in.Empty() && !b.DryRun && b.ExpectChanged == nil {
		s.fail(w, r, quarantine.FieldErrorf(quarantine.EINVALID, "/filter",
			"an empty filter selects every message: narrow it, or confirm with expect_changed"))
		return
	}
	f, err := in.Filter(s.cfg.Now(), "/filter/")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	res, err := rules.RekeyAs(r.Context(), tokenFrom(r.Context()), s.cfg.Preparer, s.cfg.Store, f,
		collect.RekeyRequest{DryRun: b.DryRun, ExpectChanged: b.ExpectChanged, Reason: b.Reason})
	if err != nil {
		s.fail(w, r, rules.InBody(err, ""))
		return
	}
	s.writeJSON(w, r, http.StatusOK, res)
}

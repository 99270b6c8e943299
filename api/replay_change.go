package api

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/rules"
)

// replayChangeBody is the body of pause, resume and cancel.
type replayChangeBody struct {
	Reason string `json:"reason"`
}

// replayStartBody is the body of start: the overrides of a dry run's
// guards may be given again, with the reason they are audited with.
type replayStartBody struct {
	Reason              string `json:"reason"`
	Force               bool   `json:"force"`
	AcceptKeyRuleChange bool   `json:"accept_key_rule_change"`
}

// changeReplay returns the handler of POST /api/v1/replays/{id}/<action>.
// The checks, in order: the body (400, 413), the reason (422), the batch
// (404, also for one the token may not see), the token's owners (403
// unless every owner of the batch's messages is one of them, recorded as
// access.denied), for start and resume the destination (403 naming
// /destination when its queue is outside the token's owners, see
// DestinationAllowed), then the store's transition (409 when the batch's
// state does not allow the action). The answer is the batch after it.
func (s *Server) changeReplay(action string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		t := tokenFrom(r.Context())
		c := quarantine.ReplayChange{Action: action, Actor: t.Actor()}
		if action == quarantine.ReplayActStart {
			var b replayStartBody
			if err := s.decodeBody(w, r, &b); err != nil {
				s.fail(w, r, err)
				return
			}
			c.Reason, c.Force, c.AcceptKeyRuleChange = b.Reason, b.Force, b.AcceptKeyRuleChange
			c.Guard = s.cfg.Replay.Guard()
		} else {
			var b replayChangeBody
			if err := s.decodeBody(w, r, &b); err != nil {
				s.fail(w, r, err)
				return
			}
			c.Reason = b.Reason
		}
		c.BatchID = chi.URLParam(r, "id")
		if err := c.Validate(); err != nil {
			if quarantine.ErrorCode(err) == quarantine.ENOTFOUND {
				s.fail(w, r, errNoReplay)
				return
			}
			s.fail(w, r, rules.ReplayField(err, ""))
			return
		}
		b, ok := s.loadReplay(w, r, true)
		if !ok {
			return
		}
		if !rules.ActsOnReplay(t, b) {
			s.deny(w, r, map[string]any{"replay": b.ID, "owners": b.Owners},
				"this replay holds messages of owners this token may not act for")
			return
		}
		if action == quarantine.ReplayActStart || action == quarantine.ReplayActResume {
			// Starting or resuming publishes: the token doing it must be
			// allowed the destination, whoever created the batch.
			if err := s.cfg.Replay.DestinationAllowed(t, b.Destination); err != nil {
				s.denyDestination(w, r, b.Destination, err)
				return
			}
		}
		b, err := s.cfg.Store.ChangeReplay(r.Context(), c)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		s.writeJSON(w, r, http.StatusOK, rules.NewReplayView(b, s.cfg.Now()))
	}
}

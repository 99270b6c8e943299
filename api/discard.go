package api

import (
	"encoding/json"
	"net/http"
	"slices"

	"github.com/quarantine-dev/quarantine"
)

// skipNotFound is the skip reason of an id that names no message the
// token may see (the store says the same of unknown ids).
const skipNotFound = "not found"

// discardOneBody is the body of POST /api/v1/messages/{id}/discard.
type discardOneBody struct {
	Reason string `json:"reason"`
}

// discardMessage discards one message and answers it, now discarded.
// A message that cannot be discarded (already discarded, being
// replayed) is 409.
func (s *Server) discardMessage(w http.ResponseWriter, r *http.Request) {
	var b discardOneBody
	if err := s.decodeBody(w, r, &b); err != nil {
		s.fail(w, r, err)
		return
	}
	m, ok := s.loadMessage(w, r, true)
	if !ok {
		return
	}
	d := quarantine.Discard{IDs: []string{m.ID}, Reason: b.Reason, Actor: tokenFrom(r.Context()).Actor()}
	if err := d.Validate(); err != nil {
		s.fail(w, r, inBody(err, ""))
		return
	}
	res, err := s.cfg.Store.Discard(r.Context(), d)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if !slices.Contains(res.Changed, m.ID) {
		why := "its status does not allow it"
		if len(res.Skipped) > 0 {
			why = res.Skipped[0].Reason
		}
		s.fail(w, r, quarantine.Errorf(quarantine.ECONFLICT, "the message was not discarded: %s", clip(why)))
		return
	}
	m, err = s.cfg.Store.GetMessage(r.Context(), m.ID)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	setETag(w, m.PayloadSHA256)
	s.writeMessage(w, r, http.StatusOK, m)
}

// discardBody is the body of POST /api/v1/messages/discard.
type discardBody struct {
	IDs         []string        `json:"ids"`
	Filter      json.RawMessage `json:"filter"`
	ExpectCount *int            `json:"expect_count"`
	Reason      string          `json:"reason"`
}

// discardMessages discards the messages named by ids, or matching a
// filter, within the token's owners. An id outside them is skipped as
// "not found", like an unknown one, and the attempt is audited. An empty
// filter (every message) needs expect_count.
func (s *Server) discardMessages(w http.ResponseWriter, r *http.Request) {
	var b discardBody
	if err := s.decodeBody(w, r, &b); err != nil {
		s.fail(w, r, err)
		return
	}
	t := tokenFrom(r.Context())
	d, err := s.bulkDiscard(&b, t.Actor())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	res := quarantine.BulkResult{Changed: []string{}, Skipped: []quarantine.BulkSkipped{}}
	var foreign []string
	if d.Filter != nil && !scope(t, d.Filter) {
		d.Filter = nil // only other teams' owners were asked for: nothing matches
	}
	if len(d.IDs) > 0 && len(t.Owners) > 0 {
		if d.IDs, foreign, err = s.ownIDs(r, t, d.IDs); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	if len(foreign) > 0 {
		ev := quarantine.NewAuditEvent(t.Actor(), quarantine.ActionAccessDenied, clipPath(r.URL.Path), map[string]any{
			"method": clip(r.Method), "path": clipPath(r.URL.Path), "ids": foreign,
			"reason": "the messages are outside the token's owners"})
		if _, err := s.cfg.Store.AppendAudit(r.Context(), ev); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	if len(d.IDs) > 0 || d.Filter != nil {
		if res, err = s.cfg.Store.Discard(r.Context(), d); err != nil {
			s.fail(w, r, inBody(err, ""))
			return
		}
	} else if d.ExpectCount != nil && *d.ExpectCount != 0 {
		s.fail(w, r, quarantine.FieldErrorf(quarantine.ECONFLICT, "/expect_count",
			"the selection matches 0 messages, not %d: nothing was discarded", *d.ExpectCount))
		return
	}
	for _, id := range foreign {
		res.Skipped = append(res.Skipped, quarantine.BulkSkipped{ID: id, Reason: skipNotFound})
	}
	if res.Changed == nil {
		res.Changed = []string{}
	}
	if res.Skipped == nil {
		res.Skipped = []quarantine.BulkSkipped{}
	}
	s.writeJSON(w, r, http.StatusOK, res)
}

// bulkDiscard checks a bulk discard body and builds the store's request.
func (s *Server) bulkDiscard(b *discardBody, actor string) (quarantine.Discard, error) {
	d := quarantine.Discard{Reason: b.Reason, Actor: actor, ExpectCount: b.ExpectCount}
	if b.ExpectCount != nil && *b.ExpectCount < 0 {
		return d, quarantine.FieldErrorf(quarantine.EINVALID, "/expect_count", "expect_count must not be negative")
	}
	ids, f, err := s.selection(b.IDs, b.Filter, b.ExpectCount)
	if err != nil {
		return d, err
	}
	d.IDs, d.Filter = ids, f
	return d, inBody(d.Validate(), "")
}

// ownIDs splits ids into those of messages the token may see and the
// others. Unknown ids stay with the first: the store skips them.
func (s *Server) ownIDs(r *http.Request, t *quarantine.Token, ids []string) (own, foreign []string, err error) {
	for _, id := range ids {
		m, err := s.cfg.Store.GetMessage(r.Context(), id)
		switch {
		case quarantine.ErrorCode(err) == quarantine.ENOTFOUND:
			own = append(own, id)
		case err != nil:
			return nil, nil, err
		case t.Sees(m.Owner):
			own = append(own, id)
		default:
			foreign = append(foreign, id)
		}
	}
	return own, foreign, nil
}

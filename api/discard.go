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
	res, err := DiscardAs(r.Context(), s.cfg.Store, t, d, r.Method, r.URL.Path)
	if err != nil {
		s.fail(w, r, err)
		return
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

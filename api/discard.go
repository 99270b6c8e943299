package api

import (
	"encoding/json"
	"net/http"
	"slices"

	"github.com/go-chi/chi/v5"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/rules"
)

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
		s.fail(w, r, rules.InBody(err, ""))
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
		s.fail(w, r, quarantine.Errorf(quarantine.ECONFLICT, "the message was not discarded: %s", quarantine.Clip(why)))
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
// filter (every message), or one matching more than the configured
// threshold, needs expect_count. A filter is a discard operation
// (Discards.Discard): a small one is answered once applied (200), a large
// one at once (202, Location: the operation).
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
	ans, async, err := s.cfg.Discards.Discard(r.Context(), t, d, r.Method, r.URL.Path)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if !async {
		s.writeJSON(w, r, http.StatusOK, ans)
		return
	}
	op := ans.Operation.Shown(s.cfg.Now())
	ans.Operation = &op
	w.Header().Set("Location", "/api/v1/discards/"+op.ID)
	s.writeJSON(w, r, http.StatusAccepted, ans)
}

// getDiscard answers a discard operation: how far it is. A token with
// owners sees the operations it started and those whose filter is
// confined to its owners (DiscardVisible; 404 for the others).
func (s *Server) getDiscard(w http.ResponseWriter, r *http.Request) {
	op, notFound, err := s.lookupDiscard(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if !rules.DiscardVisible(tokenFrom(r.Context()), op) {
		s.fail(w, r, notFound)
		return
	}
	s.writeJSON(w, r, http.StatusOK, op.Shown(s.cfg.Now()))
}

// resumeDiscard resumes a discard operation (Discards.ResumeOne): one
// whose process died (interrupted) or one that failed runs again from its
// last committed chunk, in the background (200 with the operation,
// Location: the operation). One still running is answered as it is; a
// completed one is 409. A token resumes the operations DiscardVisible
// lets it see: for the others, the 404 of an unknown one, and the
// attempt is recorded as access.denied.
func (s *Server) resumeDiscard(w http.ResponseWriter, r *http.Request) {
	op, notFound, err := s.lookupDiscard(r)
	if err == nil && !rules.DiscardVisible(tokenFrom(r.Context()), op) {
		// The 404 of an unknown operation; the attempt is recorded.
		ev := quarantine.NewAuditEvent(tokenFrom(r.Context()).Actor(), quarantine.ActionAccessDenied, op.ID, map[string]any{
			"method": quarantine.Clip(r.Method), "path": rules.ClipPath(r.URL.Path), "reason": "the discard is outside the token's owners"})
		if _, err = s.cfg.Store.AppendAudit(r.Context(), ev); err == nil {
			err = notFound
		}
	}
	if err == nil {
		op, err = s.cfg.Discards.ResumeOne(r.Context(), op.ID, tokenFrom(r.Context()).Actor())
	}
	if quarantine.ErrorCode(err) == quarantine.ENOTFOUND {
		err = notFound
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Location", "/api/v1/discards/"+op.ID)
	s.writeJSON(w, r, http.StatusOK, op.Shown(s.cfg.Now()))
}

// lookupDiscard reads the discard operation the path's {id} names, with
// the 404 of an unknown one (notFound, also err when the id is not one
// or the store has no such operation).
func (s *Server) lookupDiscard(r *http.Request) (op quarantine.DiscardOperation, notFound, err error) {
	id := chi.URLParam(r, "id")
	notFound = quarantine.FieldErrorf(quarantine.ENOTFOUND, "id", "no discard operation %q", quarantine.Clip(id))
	if !quarantine.ValidID(id) {
		return op, notFound, notFound
	}
	op, err = s.cfg.Store.GetDiscard(r.Context(), id)
	if quarantine.ErrorCode(err) == quarantine.ENOTFOUND {
		err = notFound
	}
	return op, notFound, err
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
	return d, rules.InBody(d.Validate(), "")
}

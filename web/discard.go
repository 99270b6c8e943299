package web

import (
	"net/http"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/rules"
)

// discardContent is the progress page of a discard operation.
type discardContent struct {
	Op      quarantine.DiscardOperation
	Max     int64  // the progress bar's maximum (at least 1)
	Percent int64  // done, out of 100
	ETA     string // time left at the pace so far ("" when unknown)
	Running bool   // the page refreshes itself
	// Resumable: interrupted or failed, and the token may resume it.
	Resumable bool
}

// discardProgress is GET /discards/{id}: a discard operation's state,
// counts and a progress bar with the time left, reloading itself (a meta
// refresh, no script) while it runs. A token with owners sees the
// operations rules.DiscardVisible lets it; the others are not found.
func (h *Handler) discardProgress(w http.ResponseWriter, r *http.Request, s *session) {
	op, ok := h.visibleDiscard(w, r, s)
	if !ok {
		return
	}
	now := h.cfg.Now()
	op = op.Shown(now)
	c := discardContent{Op: op, Max: max(op.Matched, 1), Running: op.State == quarantine.DiscardRunning}
	c.Percent = op.Done() * 100 / c.Max
	c.Resumable = canOperate(s.token) && (op.State == quarantine.DiscardInterrupted || op.State == quarantine.DiscardFailed)
	if eta := op.ETA(now); eta > 0 {
		c.ETA = eta.String()
	}
	h.render(w, r, http.StatusOK, "discard", page{Title: "Discard " + op.State, Token: s.token, CSRF: s.csrf, Content: c})
}

// discardResume is POST /discards/{id}/resume: an interrupted or failed
// discard operation runs again from its last committed chunk
// (api.Discards.ResumeOne), and the browser goes back to its progress
// page (so does the resume of a completed one, which changes nothing). It needs an operator; a token with owners resumes only the
// operations rules.DiscardVisible lets it see.
func (h *Handler) discardResume(w http.ResponseWriter, r *http.Request, s *session) {
	if !canOperate(s.token) {
		h.refuse(w, r, s, r.URL.Path, "ui: resuming a discard needs an operator", "Your token may not resume a discard: it needs the operator role.")
		return
	}
	op, ok := h.visibleDiscard(w, r, s)
	if !ok {
		return
	}
	// A completed one (ECONFLICT) has nothing to resume: its page says so.
	if _, err := h.cfg.Discards.ResumeOne(r.Context(), op.ID, s.token.Actor()); err != nil && quarantine.ErrorCode(err) != quarantine.ECONFLICT {
		h.fail(w, r, s, err)
		return
	}
	http.Redirect(w, r, "/discards/"+op.ID, http.StatusSeeOther)
}

// visibleDiscard reads the discard operation the path's {id} names, false
// (answered: not found, as an unknown one, or the store's error) when it
// is not there or the session's token may not see it
// (rules.DiscardVisible).
func (h *Handler) visibleDiscard(w http.ResponseWriter, r *http.Request, s *session) (quarantine.DiscardOperation, bool) {
	id := r.PathValue("id")
	if !quarantine.ValidID(id) {
		h.notFound(w, r)
		return quarantine.DiscardOperation{}, false
	}
	op, err := h.cfg.Store.GetDiscard(r.Context(), id)
	switch {
	case quarantine.ErrorCode(err) == quarantine.ENOTFOUND || (err == nil && !rules.DiscardVisible(s.token, op)):
		h.notFound(w, r)
		return op, false
	case err != nil:
		h.fail(w, r, s, err)
		return op, false
	}
	return op, true
}

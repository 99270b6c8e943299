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
}

// discardProgress is GET /discards/{id}: a discard operation's state,
// counts and a progress bar with the time left, reloading itself (a meta
// refresh, no script) while it runs. A token with owners sees the
// operations rules.DiscardVisible lets it; the others are not found.
func (h *Handler) discardProgress(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	if !quarantine.ValidID(id) {
		h.notFound(w, r)
		return
	}
	op, err := h.cfg.Store.GetDiscard(r.Context(), id)
	switch {
	case quarantine.ErrorCode(err) == quarantine.ENOTFOUND || (err == nil && !rules.DiscardVisible(s.token, op)):
		h.notFound(w, r)
		return
	case err != nil:
		h.fail(w, r, s, err)
		return
	}
	now := h.cfg.Now()
	op = op.Shown(now)
	c := discardContent{Op: op, Max: max(op.Matched, 1), Running: op.State == quarantine.DiscardRunning}
	c.Percent = op.Done() * 100 / c.Max
	if eta := op.ETA(now); eta > 0 {
		c.ETA = eta.String()
	}
	h.render(w, r, http.StatusOK, "discard", page{Title: "Discard " + op.State, Token: s.token, CSRF: s.csrf, Content: c})
}

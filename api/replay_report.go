package api

import (
	"net/http"

	"github.com/quarantine-dev/quarantine/internal/rules"
)

// replayReport streams a batch as JSON Lines (application/x-ndjson): its
// summary, then each item in publication order, one page of items at a
// time (rules.WriteReplayReport). As for the audit export, an error after the
// first line aborts the connection, so that a cut report never looks
// complete.
func (s *Server) replayReport(w http.ResponseWriter, r *http.Request) {
	b, ok := s.readReplay(w, r)
	if !ok {
		return
	}
	started, err := rules.WriteReplayReport(r.Context(), w, s.cfg.Store, b, s.cfg.Now())
	switch {
	case err == nil:
	case !started:
		s.fail(w, r, err)
	default:
		s.log.ErrorContext(r.Context(), "replay report cut short", "request_id", requestIDFrom(r.Context()),
			"replay", b.ID, "err", err)
		panic(http.ErrAbortHandler)
	}
}

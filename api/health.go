package api

import (
	"context"
	"net/http"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// readyTimeout bounds the store ping of /readyz.
const readyTimeout = 2 * time.Second

type statusBody struct {
	Status string `json:"status"`
}

// healthz answers 200 while the process serves HTTP.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	s.writeJSON(w, r, http.StatusOK, statusBody{Status: "ok"})
}

// readyz answers 200 when the store answers a ping, 503 otherwise.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	if err := s.cfg.Store.Ping(ctx); err != nil {
		s.fail(w, r, &quarantine.Error{Code: quarantine.EUNAVAILABLE, Message: "the store does not answer", Err: err})
		return
	}
	s.writeJSON(w, r, http.StatusOK, statusBody{Status: "ready"})
}

package api

import (
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/quarantine-dev/quarantine"
)

// versionList is the body of GET /api/v1/messages/{id}/versions.
type versionList struct {
	Items []quarantine.PayloadVersion `json:"items"`
}

// listVersions answers every payload a message held, oldest first,
// without their bytes.
func (s *Server) listVersions(w http.ResponseWriter, r *http.Request) {
	m, ok := s.readMessage(w, r)
	if !ok {
		return
	}
	vs, err := s.cfg.Store.PayloadVersions(r.Context(), m.ID)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if vs == nil {
		vs = []quarantine.PayloadVersion{}
	}
	s.writeJSON(w, r, http.StatusOK, versionList{Items: vs})
}

// getVersion answers one payload version with its bytes, as getMessage
// shows a payload (masked for viewers).
func (s *Server) getVersion(w http.ResponseWriter, r *http.Request) {
	if _, err := parseQuery(r); err != nil {
		s.fail(w, r, err)
		return
	}
	noVersion := quarantine.FieldErrorf(quarantine.ENOTFOUND, "version", "the message has no such payload version")
	n, err := strconv.ParseInt(chi.URLParam(r, "version"), 10, 32)
	if err != nil || n < 1 {
		s.fail(w, r, noVersion)
		return
	}
	m, ok := s.loadMessage(w, r, false)
	if !ok {
		return
	}
	v, err := s.cfg.Store.PayloadVersion(r.Context(), m.ID, int(n))
	switch {
	case quarantine.ErrorCode(err) == quarantine.ENOTFOUND:
		s.fail(w, r, noVersion)
		return
	case err != nil:
		s.fail(w, r, err)
		return
	}
	setETag(w, v.SHA256)
	s.writeWithPayload(w, r, http.StatusOK, v, v.ContentType, v.Payload)
}

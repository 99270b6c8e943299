package api

import (
	"net/http"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/rules"
)

// ownIDs splits ids into those of messages the token may see and the
// others (rules.OwnIDs).
func (s *Server) ownIDs(r *http.Request, t *quarantine.Token, ids []string) (own, foreign []string, err error) {
	return rules.OwnIDs(r.Context(), s.cfg.Store, t, ids)
}

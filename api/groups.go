package api

import (
	"net/http"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/rules"
)

// groupList is the body of GET /api/v1/groups.
type groupList struct {
	Items []quarantine.Group `json:"items"`
}

// listGroups answers the failure groups of the filtered messages the
// token may see, largest first; limit caps the groups.
func (s *Server) listGroups(w http.ResponseWriter, r *http.Request) {
	f, q, err := s.queryFilter(r, "limit")
	if err == nil {
		f.Limit, err = q.limit()
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	res := groupList{Items: []quarantine.Group{}}
	if s.searchDenied(w, r, &f) {
		return
	}
	if !rules.Scope(tokenFrom(r.Context()), &f) {
		s.writeJSON(w, r, http.StatusOK, res)
		return
	}
	groups, err := s.cfg.Store.Groups(r.Context(), f)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	for _, g := range groups {
		if g.Queues == nil {
			g.Queues = []string{}
		}
		res.Items = append(res.Items, g)
	}
	s.writeJSON(w, r, http.StatusOK, res)
}

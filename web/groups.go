package web

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/rules"
)

// maxGroups bounds the groups the page shows: the largest, as the API's
// default limit (a filter narrows them).
const maxGroups = quarantine.DefaultLimit

// groupsContent is the failure-groups page.
type groupsContent struct {
	Filter filterView
	Groups []groupRow
	Curl   string
}

// groupRow is one group with the link to its messages.
type groupRow struct {
	quarantine.Group
	Messages  string // /messages filtered to the group (and the page's filter)
	QueueList string // its queues, joined
}

// listGroups is GET /groups: the failure groups (by fingerprint) of the
// filtered messages the token may see, largest first, as GET
// /api/v1/groups; each links to its messages (the fingerprint filter).
func (h *Handler) listGroups(w http.ResponseWriter, r *http.Request, s *session) {
	fv, f, err := h.parseListFilter(s.token, r.URL.Query())
	fv.Action = "/groups"
	c := &groupsContent{Filter: fv}
	p := page{Title: "Failure groups", Token: s.token, CSRF: s.csrf, Content: c}
	if err != nil {
		p.Error = quarantine.ErrorMessage(err)
		h.render(w, r, statusOf(err), "groups", p)
		return
	}
	if h.searchRefused(w, r, s, f) {
		return
	}
	c.Curl = curlGet(r, "/api/v1/groups", fv.Values)
	f.Limit = maxGroups
	if rules.Scope(s.token, &f) {
		groups, err := h.cfg.Store.Groups(r.Context(), f)
		if err != nil {
			h.fail(w, r, s, err)
			return
		}
		for _, g := range groups {
			v := url.Values{}
			for k, vs := range fv.Values {
				if k != "fingerprint" {
					v[k] = vs
				}
			}
			v.Set("fingerprint", g.Fingerprint)
			c.Groups = append(c.Groups, groupRow{Group: g, Messages: "/messages?" + v.Encode(), QueueList: strings.Join(g.Queues, ", ")})
		}
	}
	h.render(w, r, http.StatusOK, "groups", p)
}

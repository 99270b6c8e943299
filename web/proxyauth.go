package web

import (
	"net/http"
	"strings"

	"github.com/quarantine-dev/quarantine"
)

// ProxyConfig signs people in by the headers of an identity-aware proxy
// (oauth2-proxy, a cloud's IAP…) in front of the service (config
// auth.proxy). The headers are believed only on requests whose TCP peer
// is one of Config.TrustedProxies; from anyone else they are ignored.
type ProxyConfig struct {
	UserHeader   string // names the person (X-Forwarded-Email)
	GroupsHeader string // lists their groups, comma-separated (X-Forwarded-Groups)
	Roles        []quarantine.GroupRole
}

// proxySession returns the session of the person the trusted proxy
// names. Their role and owners come from the groups header on every
// request (quarantine.RoleOfGroups); their actions are audited as
// "proxy:" and the user. A session in the database, started on their
// first request, gives their forms a CSRF token; a cookie of anyone else
// is replaced. A person of no mapped group is refused (EFORBIDDEN),
// audited at most once a minute per person.
func (h *Handler) proxySession(w http.ResponseWriter, r *http.Request, user string) (*session, error) {
	person := quarantine.SanitizeText(truncate(300, "proxy:"+user))
	var groups []string
	for _, g := range strings.Split(r.Header.Get(h.cfg.Proxy.GroupsHeader), ",") {
		if g = strings.TrimSpace(g); g != "" {
			groups = append(groups, g)
		}
	}
	role, owners, ok := quarantine.RoleOfGroups(h.cfg.Proxy.Roles, groups)
	if !ok {
		if h.refusals.first(person, h.cfg.Now()) {
			if len(groups) > 50 {
				groups = groups[:50]
			}
			ev := quarantine.NewAuditEvent(person, quarantine.ActionAccessDenied, truncate(200, r.URL.Path), map[string]any{
				"method": r.Method, "path": truncate(200, r.URL.Path), "reason": "ui.proxy_no_role", "groups": groups,
				"client": h.cfg.TrustedProxies.ClientIP(r)})
			if _, err := h.cfg.Store.AppendAudit(r.Context(), ev); err != nil {
				return nil, err
			}
		}
		return nil, quarantine.Errorf(quarantine.EFORBIDDEN, "You are signed in as %s, but none of your groups is given a role in quarantine, so you cannot use it. Ask an administrator to map one of your groups (auth.proxy.roles).", user)
	}
	tok := &quarantine.Token{Name: person, Role: role, Owners: owners, Person: person}
	if old := h.cookie(r, sessionCookie); old != "" && len(old) <= maxSessionIDBytes {
		stored, err := h.cfg.Store.UseSession(r.Context(), quarantine.HashSessionID(old), h.cfg.SessionIdle)
		switch {
		case err == nil && stored.Person == person:
			return &session{id: old, csrf: csrfOf(old), token: tok}, nil
		case err != nil && quarantine.ErrorCode(err) != quarantine.ENOTFOUND:
			return nil, err
		}
	}
	id, err := h.startSession(r, &quarantine.Session{Person: person, Role: role, Owners: owners})
	if err != nil {
		return nil, err
	}
	h.setCookie(w, r, sessionCookie, id, 0)
	return &session{id: id, csrf: csrfOf(id), token: tok}, nil
}

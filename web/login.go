package web

import (
	"crypto/subtle"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/backoff"
)

// maxSecretBytes bounds a pasted token secret; ours are 46 bytes.
const maxSecretBytes = 256

// home is where / and a fresh login lead: the overview.
const home = "/overview"

// root is the first-start banner's URL: /?token=SECRET logs in and
// redirects to home, so that the secret leaves the address bar and the
// history. Without a token it leads home or to the login form.
func (h *Handler) root(w http.ResponseWriter, r *http.Request) {
	secret := r.URL.Query().Get("token")
	if secret == "" {
		s, err := h.session(w, r)
		if err != nil {
			h.fail(w, r, nil, err)
			return
		}
		if s == nil {
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return
		}
		http.Redirect(w, r, home, http.StatusSeeOther)
		return
	}
	// A link on another site must not log the browser in to a token of
	// the attacker's choosing (login CSRF): only a URL typed, pasted or
	// opened from outside the browser (Sec-Fetch-Site: none) logs in.
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "none" && site != "same-origin" {
		h.renderLogin(w, r, http.StatusForbidden, "This login link was opened from another site: paste the token here instead.")
		return
	}
	h.login(w, r, secret)
}

// loginContent is what the login view shows besides the token form.
type loginContent struct {
	SSO bool // offer "Sign in with SSO"
}

// loginForm shows the form to paste a token, with a fresh CSRF token
// bound to the browser by the login cookie.
func (h *Handler) loginForm(w http.ResponseWriter, r *http.Request) {
	h.renderLogin(w, r, http.StatusOK, "")
}

func (h *Handler) renderLogin(w http.ResponseWriter, r *http.Request, status int, msg string) {
	csrf := randomToken()
	h.setCookie(w, r, loginCookie, csrf, 3600)
	h.render(w, r, status, "login", page{Title: "Log in", CSRF: csrf, Error: msg, Content: loginContent{SSO: h.sso != nil}})
}

// loginPost logs in with the pasted token; the form's CSRF token must
// match the login cookie (double submit).
func (h *Handler) loginPost(w http.ResponseWriter, r *http.Request) {
	want := h.cookie(r, loginCookie)
	if !sameOrigin(r) {
		h.forbidden(w, r, nil, "This form was posted from another site.")
		return
	}
	got := r.PostFormValue("csrf")
	if want == "" || got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		h.renderLogin(w, r, http.StatusForbidden, "The login form expired; try again.")
		return
	}
	h.login(w, r, strings.TrimSpace(r.PostFormValue("token")))
}

// login checks secret, starts a session and redirects home. A
// refused login is audited and answers after cfg.LoginDelay.
func (h *Handler) login(w http.ResponseWriter, r *http.Request, secret string) {
	var t *quarantine.Token
	var err error
	if secret != "" && len(secret) <= maxSecretBytes && !strings.ContainsAny(secret, " \t\r\n") {
		t, err = h.cfg.Store.TokenBySecretHash(r.Context(), quarantine.HashTokenSecret(secret))
	} else {
		err = quarantine.Errorf(quarantine.ENOTFOUND, "malformed secret")
	}
	switch {
	case quarantine.ErrorCode(err) == quarantine.ENOTFOUND || (err == nil && !t.Active()):
		h.refuseLogin(w, r)
		return
	case err != nil:
		h.fail(w, r, nil, err)
		return
	}
	id, err := h.startSession(r, &quarantine.Session{TokenHash: t.SecretHash})
	if err != nil {
		h.fail(w, r, nil, err)
		return
	}
	h.setCookie(w, r, sessionCookie, id, 0)
	h.setCookie(w, r, loginCookie, "", -1)
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, home, http.StatusSeeOther)
}

// refuseLogin audits a refused login (at most once a minute per client,
// so that a flood cannot fill the log), waits, and shows the form again.
func (h *Handler) refuseLogin(w http.ResponseWriter, r *http.Request) {
	client := h.cfg.TrustedProxies.ClientIP(r)
	if h.refusals.first(client, h.cfg.Now()) {
		ev := quarantine.NewAuditEvent("anonymous", quarantine.ActionAccessDenied, "/login", map[string]any{
			"method": r.Method, "path": r.URL.Path, "reason": "ui.login_refused", "client": client})
		if _, err := h.cfg.Store.AppendAudit(r.Context(), ev); err != nil {
			h.fail(w, r, nil, err)
			return
		}
	}
	backoff.Sleep(r.Context(), h.cfg.LoginDelay)
	h.renderLogin(w, r, http.StatusUnauthorized, "This token is unknown or revoked.")
}

// startSession stores a new session (a fresh random id: an id the
// browser held before the login is never kept, and its session, if any,
// ends) and returns its id for the cookie.
func (h *Handler) startSession(r *http.Request, s *quarantine.Session) (string, error) {
	ctx := r.Context()
	if old := h.cookie(r, sessionCookie); old != "" && len(old) <= maxSessionIDBytes {
		if err := h.cfg.Store.DeleteSession(ctx, quarantine.HashSessionID(old)); err != nil {
			return "", err
		}
	}
	id, hash := quarantine.NewSessionID()
	s.IDHash = hash
	if err := h.cfg.Store.CreateSession(ctx, s, h.cfg.SessionIdle, h.cfg.SessionMax); err != nil {
		return "", err
	}
	return id, nil
}

// logout ends the session, for every instance.
func (h *Handler) logout(w http.ResponseWriter, r *http.Request, s *session) {
	if err := h.cfg.Store.DeleteSession(r.Context(), quarantine.HashSessionID(s.id)); err != nil {
		h.fail(w, r, s, err)
		return
	}
	h.setCookie(w, r, sessionCookie, "", -1)
	to := "/login"
	if h.sso != nil && strings.HasPrefix(s.token.Person, "oidc:") {
		if u := h.sso.logoutURL(h.sso.context(r.Context())); u != "" {
			to = u // end the provider's session too
		}
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// refusalLog remembers when each client's refused login was last
// audited.
type refusalLog struct {
	mu   sync.Mutex
	last map[string]time.Time
}

func newRefusalLog() *refusalLog { return &refusalLog{last: map[string]time.Time{}} }

// first reports whether the client's refusal is the first in a minute.
func (l *refusalLog) first(client string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t, ok := l.last[client]; ok && now.Sub(t) < time.Minute {
		return false
	}
	if len(l.last) > 10000 {
		for c, t := range l.last {
			if now.Sub(t) >= time.Minute {
				delete(l.last, c)
			}
		}
	}
	l.last[client] = now
	return true
}

package web

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"strings"

	"github.com/quarantine-dev/quarantine"
)

// Cookie names. The session cookie holds a random session id; the login
// cookie holds the CSRF token of the login form, before any session. Over
// HTTPS they carry the __Host- prefix (cookieName).
const (
	sessionCookie = "quarantine_session"
	loginCookie   = "quarantine_login_csrf"
)

// session is one signed-in browser, read from the store on every request
// (store.Sessions): every instance on the database shares it, a restart
// keeps it, a logout anywhere ends it. The browser's cookie holds the
// random id; the store keeps only its SHA-256.
type session struct {
	id   string // the cookie's value
	csrf string // the CSRF token of its forms: csrfOf(id)

	// token is the token it was opened with, read again per request, or
	// for a person signed in through SSO a token built from the session
	// (Person set: the actor is the person).
	token *quarantine.Token
}

// randomToken returns 256 random bits, URL-safe.
func randomToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// csrfOf derives a session's CSRF token from its id, so that every
// instance computes the same one without storing it. It is not the
// stored hash (that is a plain SHA-256 of the id): a copy of the
// database gives neither the id nor the forms' token.
func csrfOf(id string) string {
	sum := sha256.Sum256([]byte("quarantine.csrf/v1\x00" + id))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// maxSessionIDBytes bounds a session cookie's value; ours are 43 bytes.
const maxSessionIDBytes = 100

// secure reports whether the cookies get the Secure flag: always with
// Config.Secure, else when the request came over TLS or a trusted proxy
// says the client used HTTPS (X-Forwarded-Proto).
func (h *Handler) secure(r *http.Request) bool { return h.cfg.Secure || h.cfg.TrustedProxies.HTTPS(r) }

// cookieName is name with the __Host- prefix when the cookies are Secure:
// a browser then keeps the cookie only if it is Secure, for this host
// alone (no Domain) and Path=/, so that neither a plain-HTTP page nor a
// sibling subdomain can set or overwrite it.
func (h *Handler) cookieName(r *http.Request, name string) string {
	if h.secure(r) {
		return "__Host-" + name
	}
	return name
}

// cookie returns the value of the request's cookie name (under its
// cookieName), or "".
func (h *Handler) cookie(r *http.Request, name string) string {
	c, err := r.Cookie(h.cookieName(r, name))
	if err != nil {
		return ""
	}
	return c.Value
}

func (h *Handler) setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: h.cookieName(r, name), Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: h.secure(r), SameSite: http.SameSiteStrictMode})
}

// session returns the request's session with its token, or nil when
// there is none, it ended, or its token is revoked or gone (the session
// is then ended for every instance).
//
// With Config.Proxy, a request from a trusted proxy that names a user is
// that user's, whatever its cookie says (see proxySession).
func (h *Handler) session(w http.ResponseWriter, r *http.Request) (*session, error) {
	if p := h.cfg.Proxy; p != nil && h.cfg.TrustedProxies.FromProxy(r) {
		if user := strings.TrimSpace(r.Header.Get(p.UserHeader)); user != "" {
			return h.proxySession(w, r, user)
		}
	}
	id := h.cookie(r, sessionCookie)
	if id == "" || len(id) > maxSessionIDBytes {
		return nil, nil
	}
	ctx := r.Context()
	hash := quarantine.HashSessionID(id)
	stored, err := h.cfg.Store.UseSession(ctx, hash, h.cfg.SessionIdle)
	switch {
	case quarantine.ErrorCode(err) == quarantine.ENOTFOUND:
		return nil, nil
	case err != nil:
		return nil, err
	}
	if stored.Person != "" {
		// A person from single sign-on: their role and owners are those
		// their groups gave them at sign-in, while SSO is configured. A
		// proxy's person is theirs only with the proxy's headers (above):
		// their session alone, without them, opens nothing.
		if h.sso == nil || !strings.HasPrefix(stored.Person, "oidc:") {
			return nil, nil
		}
		t := &quarantine.Token{Name: stored.Person, Role: stored.Role, Owners: stored.Owners, Person: stored.Person}
		return &session{id: id, csrf: csrfOf(id), token: t}, nil
	}
	t, err := h.cfg.Store.TokenBySecretHash(ctx, stored.TokenHash)
	switch {
	case quarantine.ErrorCode(err) == quarantine.ENOTFOUND || (err == nil && !t.Active()):
		return nil, h.cfg.Store.DeleteSession(ctx, hash)
	case err != nil:
		return nil, err
	}
	return &session{id: id, csrf: csrfOf(id), token: t}, nil
}

// authed serves next with the request's session, and redirects to the
// login form without one.
func (h *Handler) authed(next func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, err := h.session(w, r)
		if err != nil {
			h.fail(w, r, nil, err)
			return
		}
		if s == nil {
			if r.Method != http.MethodGet {
				h.forbidden(w, r, nil, "You are not logged in.")
				return
			}
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return
		}
		if r.Method == http.MethodPost && !h.checkPost(w, r, s.csrf) {
			return
		}
		next(w, r, s)
	}
}

// checkPost refuses a POST from another origin or without the expected
// CSRF token (the form's "csrf" field), and reports whether it passed.
func (h *Handler) checkPost(w http.ResponseWriter, r *http.Request, want string) bool {
	if !sameOrigin(r) {
		h.forbidden(w, r, nil, "This form was posted from another site.")
		return false
	}
	got := r.PostFormValue("csrf")
	if want == "" || got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		h.forbidden(w, r, nil, "This form has expired or was not sent by this site; reload the page and try again.")
		return false
	}
	return true
}

// crossOrigin is net/http's cross-origin protection: a browser's
// Sec-Fetch-Site decides when it is sent; otherwise an Origin, when sent,
// must be this host's. Clients that send neither are checked by the CSRF
// token alone.
var crossOrigin = http.NewCrossOriginProtection()

// sameOrigin reports whether a POST comes from a page of this site.
func sameOrigin(r *http.Request) bool { return crossOrigin.Check(r) == nil }

func (h *Handler) forbidden(w http.ResponseWriter, r *http.Request, s *session, msg string) {
	p := page{Title: "Refused", Error: msg}
	if s != nil {
		p.Token, p.CSRF = s.token, s.csrf
	}
	h.render(w, r, http.StatusForbidden, "error", p)
}

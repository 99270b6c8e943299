package web

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"sync"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// Cookie names. The session cookie holds a random session id; the login
// cookie holds the CSRF token of the login form, before any session. Over
// HTTPS they carry the __Host- prefix (cookieName).
const (
	sessionCookie = "quarantine_session"
	loginCookie   = "quarantine_login_csrf"
)

// maxSessions bounds the sessions held in memory.
const maxSessions = 10000

// session is one logged-in browser. It keeps the token's secret hash,
// not the token: every request looks the token up again, so that a
// revoked token's sessions end at once.
type session struct {
	id        string
	tokenHash string
	csrf      string
	expires   time.Time

	token *quarantine.Token // filled per request by Handler.session
}

// sessions maps random session ids to sessions, in memory: a restart
// logs every browser out.
type sessions struct {
	ttl time.Duration
	mu  sync.Mutex
	m   map[string]*session
}

func newSessions(ttl time.Duration) *sessions {
	return &sessions{ttl: ttl, m: map[string]*session{}}
}

// randomToken returns 256 random bits, URL-safe.
func randomToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// create starts a session for the token of hash.
func (ss *sessions) create(hash string, now time.Time) (*session, error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if len(ss.m) >= maxSessions {
		for id, s := range ss.m {
			if !now.Before(s.expires) {
				delete(ss.m, id)
			}
		}
		if len(ss.m) >= maxSessions {
			return nil, quarantine.Errorf(quarantine.EUNAVAILABLE, "too many sessions")
		}
	}
	s := &session{id: randomToken(), tokenHash: hash, csrf: randomToken(), expires: now.Add(ss.ttl)}
	ss.m[s.id] = s
	return s, nil
}

// get returns the live session of id, or nil.
func (ss *sessions) get(id string, now time.Time) *session {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s, ok := ss.m[id]
	if !ok {
		return nil
	}
	if !now.Before(s.expires) {
		delete(ss.m, id)
		return nil
	}
	c := *s
	return &c
}

func (ss *sessions) delete(id string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.m, id)
}

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
// there is none, it expired, or its token is revoked or gone.
func (h *Handler) session(r *http.Request) (*session, error) {
	id := h.cookie(r, sessionCookie)
	if id == "" || len(id) > 100 {
		return nil, nil
	}
	s := h.sessions.get(id, h.cfg.Now())
	if s == nil {
		return nil, nil
	}
	t, err := h.cfg.Store.TokenBySecretHash(r.Context(), s.tokenHash)
	switch {
	case quarantine.ErrorCode(err) == quarantine.ENOTFOUND || (err == nil && !t.Active()):
		h.sessions.delete(s.id)
		return nil, nil
	case err != nil:
		return nil, err
	}
	s.token = t
	return s, nil
}

// authed serves next with the request's session, and redirects to the
// login form without one.
func (h *Handler) authed(next func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, err := h.session(r)
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

// sameOrigin reports whether a POST comes from a page of this site. A
// browser's Sec-Fetch-Site decides when it is sent; otherwise an Origin,
// when sent, must be this host's. Clients that send neither are checked by
// the CSRF token alone.
func sameOrigin(r *http.Request) bool {
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" {
		return s == "same-origin" || s == "none"
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	return o == "http://"+r.Host || o == "https://"+r.Host
}

func (h *Handler) forbidden(w http.ResponseWriter, r *http.Request, s *session, msg string) {
	p := page{Title: "Refused", Error: msg}
	if s != nil {
		p.Token, p.CSRF = s.token, s.csrf
	}
	h.render(w, r, http.StatusForbidden, "error", p)
}

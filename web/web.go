// Package web serves the browser UI: server-rendered pages over the same
// store, tokens and roles as the API.
//
// Every page is an html/template view from templates/, parsed once by New;
// every stored string (payloads, reasons, queues, headers…) is untrusted
// and reaches the page only through html/template's contextual escaping,
// never as template.HTML. Static assets are embedded and served at
// content-hash URLs with immutable caching.
//
// A browser logs in with a token secret (the first-start banner's
// /?token=… or the login form), through single sign-on (OpenID Connect,
// see oidc.go) or behind an identity-aware proxy (see proxy.go); the
// session cookie holds a random session
// id, never the secret, and the database keeps only the id's SHA-256 (see
// session.go). Every form carries the session's
// CSRF token, checked on every POST (see csrf.go).
package web

import (
	"bytes"
	"embed"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/alert"
	"github.com/quarantine-dev/quarantine/internal/clientip"
	"github.com/quarantine-dev/quarantine/internal/defaults"
	"github.com/quarantine-dev/quarantine/internal/rules"
	"github.com/quarantine-dev/quarantine/store"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static/*
var staticFS embed.FS

// Config is what the UI needs.
type Config struct {
	Store  store.Store
	Logger *slog.Logger
	Now    func() time.Time
	// Secure sets the Secure flag and the __Host- prefix of the cookies
	// (also set on requests that arrive over TLS, or from a trusted proxy
	// with X-Forwarded-Proto: https).
	Secure bool
	// TrustedProxies are the reverse proxies whose X-Forwarded-For and
	// X-Forwarded-Proto are believed (config trusted_proxies); the zero
	// value trusts none.
	TrustedProxies clientip.Proxies
	// RedactPointers are the JSON Pointers masked for viewers (the API's
	// redact.json_pointers). While the web UI cannot mask them, a viewer
	// is shown no payload at all when any is configured.
	RedactPointers []string
	// SessionIdle ends a session unused for that long (0 means
	// DefaultSessionIdle); SessionMax ends it that long after the login,
	// used or not (0 means DefaultSessionMax).
	SessionIdle time.Duration
	SessionMax  time.Duration
	// OIDC, when set, offers "Sign in with SSO" on the login page
	// (/auth/oidc/login and /auth/oidc/callback).
	OIDC *OIDCConfig
	// Proxy, when set, believes a user and groups header from the
	// TrustedProxies (an identity-aware proxy such as oauth2-proxy).
	Proxy *ProxyConfig
	// LoginDelay is how long a refused login waits before it answers; 0
	// means DefaultLoginDelay.
	LoginDelay time.Duration
	// Owners are the owner rules (config owners:): the overview shows
	// each queue's owner by them, as GET /api/v1/queues does, and they
	// decide the destination queues a token may replay to when
	// Replay.Owners is nil.
	Owners []quarantine.OwnerRule
	// Alarms are the age alarms (config alarms:): the overview colours
	// each queue's oldest age against the max_age of its alarms.
	Alarms []alert.Rule
	// Edit holds the checks of a payload edit that need the configuration
	// (idempotency rules, JSON Schemas): the API's.
	Edit rules.EditRules
	// Replay holds the defaults and limits of replay requests: the API's
	// (zero members take rules.ReplayDefaults.WithDefaults).
	Replay rules.ReplayDefaults
	// Discards runs the discards by filter, the API's (nil: a runner of
	// its own with rules.DiscardConfig's defaults).
	Discards *rules.Discards
}

// Defaults of Config.
const (
	DefaultSessionIdle = 30 * time.Minute
	DefaultSessionMax  = 12 * time.Hour
	DefaultLoginDelay  = 500 * time.Millisecond
)

// views names the page templates every UI needs; New fails when one is
// missing. Every templates/*.html other than layout.html and partials
// (names starting with "_", included in every view) is parsed as a view.
var views = []string{"login", "messages", "message", "notfound", "error", "edit", "replay_new", "replays", "replay", "discard"}

// Handler is the UI's http.Handler.
type Handler struct {
	cfg      Config
	log      *slog.Logger
	views    map[string]*template.Template
	static   *assets
	refusals *refusalLog
	sso      *sso // nil without Config.OIDC
	mux      *http.ServeMux
}

// New parses the views and returns the UI's handler. It fails when a view
// or an asset is missing or does not parse.
func New(cfg Config) (*Handler, error) {
	return newHandler(cfg, templateFS, staticFS)
}

func newHandler(cfg Config, tfs, sfs fs.FS) (*Handler, error) {
	if cfg.Store == nil {
		return nil, quarantine.Errorf(quarantine.EINVALID, "web: a store is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	defaults.Positive(&cfg.SessionIdle, DefaultSessionIdle)
	defaults.Positive(&cfg.SessionMax, DefaultSessionMax)
	defaults.Positive(&cfg.LoginDelay, DefaultLoginDelay)
	if cfg.Replay.Owners == nil {
		cfg.Replay.Owners = cfg.Owners // the destination queues a token may name
	}
	cfg.Replay = cfg.Replay.WithDefaults()
	if cfg.Discards == nil {
		cfg.Discards = rules.NewDiscards(cfg.Store, rules.DiscardConfig{}, cfg.Logger)
	}
	st, err := loadAssets(sfs)
	if err != nil {
		return nil, err
	}
	h := &Handler{cfg: cfg, log: cfg.Logger.With("component", "web"), static: st,
		refusals: newRefusalLog(), views: map[string]*template.Template{}}
	funcs := template.FuncMap{
		"static":  st.url,
		"ago":     func(t time.Time) string { return ago(cfg.Now(), t) },
		"utc":     func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
		"rfc3339": func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
		"trunc":   truncate,
		"shortid": shortID,
	}
	names, err := viewNames(tfs)
	if err != nil {
		return nil, err
	}
	for _, v := range views {
		if !slices.Contains(names, v) {
			return nil, quarantine.Errorf(quarantine.EINVALID, "web: view %s is missing", v)
		}
	}
	partials, err := fs.Glob(tfs, "templates/_*.html")
	if err != nil {
		return nil, quarantine.Errorf(quarantine.EINVALID, "web: templates: %v", err)
	}
	for _, v := range names {
		files := append([]string{"templates/layout.html"}, partials...)
		t, err := template.New(v).Funcs(funcs).ParseFS(tfs, append(files, "templates/"+v+".html")...)
		if err != nil {
			return nil, quarantine.Errorf(quarantine.EINVALID, "web: view %s: %v", v, err)
		}
		if t.Lookup("content") == nil {
			return nil, quarantine.Errorf(quarantine.EINVALID, "web: view %s defines no content", v)
		}
		h.views[v] = t
	}
	if cfg.OIDC != nil {
		h.sso = newSSO(*cfg.OIDC)
	}
	h.routes()
	return h, nil
}

// viewNames lists the views in tfs: templates/*.html but the layout and
// the partials.
func viewNames(tfs fs.FS) ([]string, error) {
	files, err := fs.Glob(tfs, "templates/*.html")
	if err != nil {
		return nil, quarantine.Errorf(quarantine.EINVALID, "web: templates: %v", err)
	}
	var names []string
	for _, f := range files {
		n := strings.TrimSuffix(path.Base(f), ".html")
		if n == "layout" || strings.HasPrefix(n, "_") {
			continue
		}
		names = append(names, n)
	}
	return names, nil
}

// routes is the UI's route table: each area of the UI registers its own
// routes (overviewRoutes, messageRoutes, …, each in its area's file).
func (h *Handler) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /{$}", h.root)
	m.HandleFunc("GET /login", h.loginForm)
	m.HandleFunc("POST /login", h.loginPost)
	m.HandleFunc("POST /logout", h.authed(h.logout))
	if h.sso != nil {
		m.HandleFunc("GET /auth/oidc/login", h.ssoLogin)
		m.HandleFunc("GET /auth/oidc/callback", h.ssoCallback)
	}
	h.overviewRoutes(m)
	h.messageRoutes(m)
	h.editRoutes(m)
	h.replayRoutes(m)
	h.auditRoutes(m)
	m.Handle("GET /static/", h.static)
	m.HandleFunc("/", h.notFound)
	h.mux = m
}

// ServeHTTP serves the UI with its security headers.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	// Scripts only from our own static files (no inline script, no
	// eval): the pages work without them, scripts only add to them.
	hd.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	// The banner's URL carries the token: no URL of the UI may leave the
	// site (same-origin still lets the browser send Origin on a POST).
	hd.Set("Referrer-Policy", "same-origin")
	if r.Method == http.MethodPost {
		// The POSTs are small forms, but for the editor's (maxBody).
		r.Body = http.MaxBytesReader(w, r.Body, maxBody(r))
	}
	h.mux.ServeHTTP(w, r)
}

// maxFormBytes caps a form's body.
const maxFormBytes = 16 << 10

// page is what every view gets.
type page struct {
	Title   string
	Token   *quarantine.Token // nil when not logged in
	CSRF    string
	Error   string
	Flash   string // a confirmation of what the previous request did
	Content any
}

// render executes a view into a buffer, then writes it: a failing view
// is a 500, never half a page.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, status int, view string, p page) {
	t := h.views[view]
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", p); err != nil {
		h.log.Error("render", "view", view, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "text/html; charset=utf-8")
	// Pages show what one token may read: no cache may keep them.
	hd.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

func (h *Handler) notFound(w http.ResponseWriter, r *http.Request) {
	s, _ := h.session(w, r)
	p := page{Title: "Not found"}
	if s != nil {
		p.Token, p.CSRF = s.token, s.csrf
	}
	h.render(w, r, http.StatusNotFound, "notfound", p)
}

// fail answers err on the error page, with its status from the one table
// of the API and the UI (rules.ErrorStatus). A client error shows its
// message; an unavailable store says so; any other server error is
// logged and shown as such, without its details.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, s *session, err error) {
	status := statusOf(err)
	msg := quarantine.ErrorMessage(err)
	switch {
	case status == http.StatusServiceUnavailable:
		msg = "The store is unavailable; try again."
	case status >= http.StatusInternalServerError:
		msg = "Something went wrong; it was logged."
	}
	if status >= http.StatusInternalServerError && status != http.StatusServiceUnavailable {
		h.log.Error("request", "path", r.URL.Path, "err", err)
	}
	p := page{Title: "Error", Error: msg}
	if s != nil {
		p.Token, p.CSRF = s.token, s.csrf
	}
	h.render(w, r, status, "error", p)
}

// truncate shortens s to at most n runes, with an ellipsis.
func truncate(n int, s string) string {
	i := 0
	for j := range s {
		if i == n {
			return s[:j] + "…"
		}
		i++
	}
	return s
}

// shortID is an identifier as tables show it: a ULID's last 8
// characters (its random part, which differs between ids made in the same
// millisecond, as its time prefix does not) after "…"; anything that is
// not a ULID whole.
func shortID(id string) string {
	if !quarantine.ValidID(id) {
		return id
	}
	return "…" + id[len(id)-8:]
}

// ago is t relative to now, like "3 h ago".
func ago(now, t time.Time) string {
	d := now.Sub(t)
	future := d < 0
	if future {
		d = -d
	}
	var s string
	switch {
	case d < time.Minute:
		s = "just now"
		return s
	case d < time.Hour:
		s = strconv.Itoa(int(d/time.Minute)) + " min"
	case d < 48*time.Hour:
		s = strconv.Itoa(int(d/time.Hour)) + " h"
	default:
		s = strconv.Itoa(int(d/(24*time.Hour))) + " d"
	}
	if future {
		return "in " + s
	}
	return s + " ago"
}

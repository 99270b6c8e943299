package web_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store"
	"github.com/quarantine-dev/quarantine/store/sqlite"
	"github.com/quarantine-dev/quarantine/web"
)

// env is the UI over a fresh SQLite store.
type env struct {
	t     *testing.T
	store store.Store
	srv   *httptest.Server
}

func newEnv(t *testing.T, opts ...func(*web.Config)) *env {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "q.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	cfg := web.Config{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), LoginDelay: time.Millisecond}
	for _, o := range opts {
		o(&cfg)
	}
	h, err := web.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, store: st, srv: httptest.NewServer(h)}
	t.Cleanup(e.srv.Close)
	return e
}

// token creates a token and returns its secret.
func (e *env) token(name string, role quarantine.Role, owners ...string) string {
	e.t.Helper()
	secret, hash := quarantine.NewTokenSecret()
	tok := &quarantine.Token{Name: name, Role: role, Owners: owners, SecretHash: hash}
	if err := e.store.CreateToken(context.Background(), tok, "test"); err != nil {
		e.t.Fatal(err)
	}
	return secret
}

// message stores a message and returns it.
func (e *env) message(m quarantine.Message) *quarantine.Message {
	e.t.Helper()
	if m.Source == "" {
		m.Source = "test"
	}
	if m.DedupeKey == "" {
		m.DedupeKey = quarantine.NewID(time.Now())
	}
	if m.Owner == "" {
		m.Owner = "team-a"
	}
	if m.ContentType == "" {
		m.ContentType = "application/json"
	}
	m.Normalize(time.Now())
	if _, err := e.store.InsertBatch(context.Background(), []*quarantine.Message{&m}); err != nil {
		e.t.Fatal(err)
	}
	return &m
}

// client is a browser-like client: a cookie jar, no automatic redirects.
func (e *env) client() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// get sends a GET and returns the response with its body read.
func get(t *testing.T, c *http.Client, u string) (*http.Response, string) {
	t.Helper()
	res, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

func postForm(t *testing.T, c *http.Client, u string, v url.Values, header ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(v.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

// login logs c in with the banner URL.
func (e *env) login(c *http.Client, secret string) {
	e.t.Helper()
	res, _ := get(e.t, c, e.srv.URL+"/?token="+url.QueryEscape(secret))
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/overview" {
		e.t.Fatalf("login: %d to %q", res.StatusCode, res.Header.Get("Location"))
	}
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf returns the CSRF token of a page's first form.
func csrf(t *testing.T, body string) string {
	t.Helper()
	m := csrfRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no csrf field in %s", body)
	}
	return m[1]
}

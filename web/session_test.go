package web_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/pgtest"
	"github.com/quarantine-dev/quarantine/store"
	"github.com/quarantine-dev/quarantine/store/postgres"
	"github.com/quarantine-dev/quarantine/store/sqlite"
	"github.com/quarantine-dev/quarantine/web"
)

// moveClock is a clock the test moves.
type moveClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *moveClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *moveClock) Add(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.now = c.now.Add(d) }

// serveUI serves the UI over st until t ends (or until the returned
// server is closed).
func serveUI(t *testing.T, st store.Store, opts ...func(*web.Config)) *httptest.Server {
	t.Helper()
	cfg := web.Config{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), LoginDelay: time.Millisecond}
	for _, o := range opts {
		o(&cfg)
	}
	h, err := web.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// sessionCookie returns c's session cookie for srv's URL, or "".
func sessionCookieOf(c *http.Client, base string) string {
	u, _ := url.Parse(base)
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Name == "quarantine_session" {
			return ck.Value
		}
	}
	return ""
}

// loggedIn reports whether c's session opens /messages on base.
func loggedIn(t *testing.T, c *http.Client, base string) bool {
	t.Helper()
	res, _ := get(t, c, base+"/messages")
	switch res.StatusCode {
	case http.StatusOK:
		return true
	case http.StatusSeeOther:
		if res.Header.Get("Location") != "/login" {
			t.Fatalf("/messages: 303 to %q", res.Header.Get("Location"))
		}
		return false
	}
	t.Fatalf("/messages: %d", res.StatusCode)
	return false
}

// A login never keeps an id the browser held before: a planted id
// (session fixation) opens nothing, and a session the browser had ends.
func TestSessionIDRotatedAtLogin(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u, _ := url.Parse(e.srv.URL)
	planted, _ := quarantine.NewSessionID()
	c := e.client()
	c.Jar.SetCookies(u, []*http.Cookie{{Name: "quarantine_session", Value: planted, Path: "/"}})
	e.login(c, e.token("admin", quarantine.RoleAdmin))
	first := sessionCookieOf(c, e.srv.URL)
	if first == "" || first == planted {
		t.Fatalf("session cookie after login = %q, the planted id was %q", first, planted)
	}
	attacker := e.client()
	attacker.Jar.SetCookies(u, []*http.Cookie{{Name: "quarantine_session", Value: planted, Path: "/"}})
	if loggedIn(t, attacker, e.srv.URL) {
		t.Fatal("the planted id opens the session")
	}

	// Logging in again, the browser gets a new id and the old one ends.
	e.login(c, e.token("viewer", quarantine.RoleViewer))
	second := sessionCookieOf(c, e.srv.URL)
	if second == "" || second == first {
		t.Fatalf("second login kept the id %q", first)
	}
	old := e.client()
	old.Jar.SetCookies(u, []*http.Cookie{{Name: "quarantine_session", Value: first, Path: "/"}})
	if loggedIn(t, old, e.srv.URL) {
		t.Fatal("the id of before the second login still opens a session")
	}
	if !loggedIn(t, c, e.srv.URL) {
		t.Fatal("the new session does not open /messages")
	}
}

// The idle and absolute timeouts of the configuration end a session by
// the store's clock.
func TestSessionIdleAndAbsoluteTimeouts(t *testing.T) {
	t.Parallel()
	clock := &moveClock{now: time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)}
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "q.db"), sqlite.WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, store: st}
	e.srv = serveUI(t, st, func(c *web.Config) { c.SessionIdle = 10 * time.Minute; c.SessionMax = time.Hour })
	secret := e.token("admin", quarantine.RoleAdmin)

	c := e.client()
	e.login(c, secret)
	clock.Add(9 * time.Minute)
	if !loggedIn(t, c, e.srv.URL) {
		t.Fatal("ended after 9 minutes idle, the idle timeout is 10")
	}
	clock.Add(10 * time.Minute)
	if loggedIn(t, c, e.srv.URL) {
		t.Fatal("alive after 10 minutes idle")
	}

	e.login(c, secret)
	for range 6 { // used every 9 minutes: 54 minutes
		clock.Add(9 * time.Minute)
		if !loggedIn(t, c, e.srv.URL) {
			t.Fatal("a session in use ended before its absolute timeout")
		}
	}
	clock.Add(6 * time.Minute) // 60 minutes after the login, used 6 minutes ago
	if loggedIn(t, c, e.srv.URL) {
		t.Fatal("alive at its absolute timeout")
	}
}

// Two instances on one PostgreSQL share the sessions: a login on one is
// a session on the other, a restart keeps it, and a logout on either
// ends it on both. The database holds only the id's SHA-256.
func TestSessionSharedByInstancesOnPostgres(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.URL(t)
	ctx := context.Background()
	open := func() *postgres.Store {
		st, err := postgres.Open(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		if err := st.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		return st
	}
	stA, stB := open(), open()
	a, b := serveUI(t, stA), serveUI(t, stB)
	e := &env{t: t, store: stA, srv: a}
	secret := e.token("admin", quarantine.RoleAdmin)

	onA := e.client()
	e.login(onA, secret)
	id := sessionCookieOf(onA, a.URL)
	// The same browser, sent to the other instance by a load balancer.
	onB := e.client()
	bu, _ := url.Parse(b.URL)
	onB.Jar.SetCookies(bu, []*http.Cookie{{Name: "quarantine_session", Value: id, Path: "/"}})
	if !loggedIn(t, onB, b.URL) {
		t.Fatal("the session of instance A does not open instance B")
	}

	var hashes []string
	rows, err := stA.Pool().Query(ctx, `SELECT id_hash FROM sessions`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var h string
		if err := rows.Scan(&h); err != nil {
			t.Fatal(err)
		}
		hashes = append(hashes, h)
	}
	if rows.Err() != nil || len(hashes) != 1 || hashes[0] != quarantine.HashSessionID(id) {
		t.Fatalf("sessions hold %v (%v), want only the SHA-256 of the cookie's id", hashes, rows.Err())
	}
	var leaks int
	if err := stA.Pool().QueryRow(ctx, `SELECT count(*) FROM sessions
		WHERE strpos(id_hash || token_hash || person || owners, $1) > 0`, id).Scan(&leaks); err != nil || leaks != 0 {
		t.Fatalf("the session id itself is stored (%d rows, %v)", leaks, err)
	}

	// A restart of A: a new process on the same database keeps it.
	a.Close()
	if err := stA.Close(); err != nil {
		t.Fatal(err)
	}
	a2 := serveUI(t, open())
	onA2 := e.client()
	a2u, _ := url.Parse(a2.URL)
	onA2.Jar.SetCookies(a2u, []*http.Cookie{{Name: "quarantine_session", Value: id, Path: "/"}})
	res, body := get(t, onA2, a2.URL+"/messages")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("after a restart /messages: %d, want the session kept", res.StatusCode)
	}

	// Log out on B with the form of A's page: the CSRF token is the same
	// on every instance. Then A refuses the session.
	res, _ = postForm(t, onB, b.URL+"/logout", url.Values{"csrf": {csrf(t, body)}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/login" {
		t.Fatalf("logout on B: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	if loggedIn(t, onA2, a2.URL) {
		t.Fatal("instance A still accepts a session logged out on B")
	}
}

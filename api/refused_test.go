package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/api"
	"github.com/quarantine-dev/quarantine/internal/clientip"
)

// fakeClock is a settable clock for Config.Now.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// serveFrom sends a request to e's handler as if from the client at
// addr (no network involved) and checks the answer against openapi.yaml.
func (e *env) serveFrom(addr, method, target, secret string) *resp {
	e.t.Helper()
	req := httptest.NewRequest(method, target, nil)
	req.RemoteAddr = addr
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	rec := httptest.NewRecorder()
	e.srv.Config.Handler.ServeHTTP(rec, req)
	r := &resp{req: req, status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
	checkResponse(e.t, req, r)
	return r
}

// TestRefusedLoginsThrottledAndAudited sends 900 wrong tokens from one
// client: after the budget each is 429 with Retry-After, while a valid
// token is served, from that client as from another; the refusals become
// one auth.refused event for the client and minute, with the counts, not
// 900 events.
func TestRefusedLoginsThrottledAndAudited(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{now: time.Date(2026, 12, 1, 12, 0, 5, 0, time.UTC)}
	e := newEnv(t, withNow(clock.Now))
	const attacker, other = "192.0.2.10:40000", "198.51.100.7:5555"
	wrong, _ := quarantine.NewTokenSecret()
	counts := map[int]int{}
	for i := range 900 {
		if i%100 == 0 {
			clock.Add(time.Second) // time passes, less than the budget refills
		}
		r := e.serveFrom(attacker, http.MethodGet, "/api/v1/messages", wrong)
		counts[r.status]++
		switch r.status {
		case http.StatusUnauthorized:
			r.problem(t, r.status, "")
		case http.StatusTooManyRequests:
			r.problem(t, r.status, "")
			if n, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || n < 1 || n > 3 {
				t.Fatalf("Retry-After %q", r.header.Get("Retry-After"))
			}
		default:
			t.Fatalf("wrong token %d: status %d", i, r.status)
		}
	}
	// 20 at once, then one per 3 s: 9 s passed.
	if counts[http.StatusUnauthorized] < 20 || counts[http.StatusUnauthorized] > 23 || counts[http.StatusTooManyRequests] != 900-counts[http.StatusUnauthorized] {
		t.Fatalf("900 wrong tokens answered %v, want about 20 × 401 and the rest 429", counts)
	}
	// A valid token from the throttled address is served (another person
	// behind the same NAT or proxy), and its next wrong one is slowed.
	e.serveFrom(attacker, http.MethodGet, "/api/v1/messages", e.viewer).want(t, http.StatusOK)
	e.serveFrom(attacker, http.MethodGet, "/api/v1/messages", e.admin).want(t, http.StatusOK)
	e.serveFrom(attacker, http.MethodGet, "/api/v1/messages", wrong).problem(t, http.StatusTooManyRequests, "")
	counts[http.StatusTooManyRequests]++
	// Another client is unaffected, and has its own budget.
	e.serveFrom(other, http.MethodGet, "/api/v1/messages", e.viewer).want(t, http.StatusOK)
	e.serveFrom(other, http.MethodGet, "/api/v1/messages", wrong).problem(t, http.StatusUnauthorized, "")
	e.serveFrom(other, http.MethodGet, "/api/v1/messages", e.viewer).want(t, http.StatusOK)

	// A minute later the budget is back; the next refusal closes the
	// attacker's minute, written as one event.
	clock.Add(time.Minute)
	e.serveFrom(attacker, http.MethodGet, "/api/v1/messages", e.viewer).want(t, http.StatusOK)
	e.serveFrom(attacker, http.MethodGet, "/api/v1/messages", wrong).problem(t, http.StatusUnauthorized, "")
	var page struct{ Items []auditEvent }
	e.get("/api/v1/audit?action="+api.ActionAuthRefused+"&limit=1000", e.admin).want(t, http.StatusOK).decode(t, &page)
	if len(page.Items) != 1 {
		t.Fatalf("%d auth.refused events after 902 refusals, want 1 (the attacker's first minute): %+v", len(page.Items), page.Items)
	}
	ev := page.Items[0]
	var d struct {
		Client    string `json:"client"`
		Minute    string `json:"minute"`
		Refused   int    `json:"refused"`
		Throttled int    `json:"throttled"`
	}
	if err := json.Unmarshal(ev.Details, &d); err != nil {
		t.Fatal(err)
	}
	if ev.Subject != "192.0.2.10" || d.Client != "192.0.2.10" || d.Minute != "2026-12-01T12:00:00Z" ||
		d.Refused != counts[http.StatusUnauthorized] || d.Throttled != counts[http.StatusTooManyRequests] {
		t.Fatalf("auth.refused event %s %s, want client 192.0.2.10, %d refused and %d throttled",
			ev.Subject, ev.Details, counts[http.StatusUnauthorized], counts[http.StatusTooManyRequests])
	}
	if v := e.get("/api/v1/audit/verify", e.admin).want(t, http.StatusOK); !json.Valid(v.body) {
		t.Fatal("verify")
	}
}

// TestRefusedLoginWrittenWhenItsMinuteEnds: a single refusal is written
// when its minute ends, without another request to close it.
func TestRefusedLoginWrittenWhenItsMinuteEnds(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{now: time.Date(2026, 12, 1, 12, 0, 59, 900_000_000, time.UTC)} // 100 ms before the minute ends
	e := newEnv(t, withNow(clock.Now))
	e.serveFrom("203.0.113.5:1", http.MethodGet, "/api/v1/queues", "").problem(t, http.StatusUnauthorized, "")
	deadline := time.Now().Add(10 * time.Second)
	for {
		evs, err := e.store.ListAudit(t.Context(), quarantine.AuditFilter{Action: api.ActionAuthRefused})
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 1 && evs[0].Subject == "203.0.113.5" {
			var d struct{ Refused, Throttled int }
			if err := json.Unmarshal(evs[0].Details, &d); err != nil || d.Refused != 1 || d.Throttled != 0 {
				t.Fatalf("event %s (%v)", evs[0].Details, err)
			}
			return
		}
		if len(evs) > 1 || time.Now().After(deadline) {
			t.Fatalf("auth.refused events %+v, want one for 203.0.113.5", evs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// refusedEvents reads the auth.refused events straight from the store.
func (e *env) refusedEvents() []quarantine.AuditEvent {
	e.t.Helper()
	evs, err := e.store.ListAudit(e.t.Context(), quarantine.AuditFilter{Action: api.ActionAuthRefused})
	if err != nil {
		e.t.Fatal(err)
	}
	return evs
}

// TestRefusedLoginsWrittenOnClose: the counts of a minute that has not
// ended are written when the server closes, not lost with the process.
func TestRefusedLoginsWrittenOnClose(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{now: time.Date(2026, 12, 1, 12, 0, 5, 0, time.UTC)} // 55 s before the minute ends
	e := newEnv(t, withNow(clock.Now))
	for range 3 {
		e.serveFrom("203.0.113.9:1", http.MethodGet, "/api/v1/queues", "").problem(t, http.StatusUnauthorized, "")
	}
	if evs := e.refusedEvents(); len(evs) != 0 {
		t.Fatalf("written before the minute ended: %+v", evs)
	}
	e.srv.Close() // no more requests
	if err := e.api.Close(); err != nil {
		t.Fatal(err)
	}
	evs := e.refusedEvents()
	if len(evs) != 1 || evs[0].Subject != "203.0.113.9" {
		t.Fatalf("auth.refused events after Close %+v, want one for 203.0.113.9", evs)
	}
	var d struct{ Refused, Throttled int }
	if err := json.Unmarshal(evs[0].Details, &d); err != nil || d.Refused != 3 || d.Throttled != 0 {
		t.Fatalf("event %s (%v), want 3 refused", evs[0].Details, err)
	}
}

// TestRefusedLoginsBehindTrustedProxy: behind a trusted proxy each client
// named by X-Forwarded-For has its own budget and event; a client that
// is not a trusted proxy cannot pick its address with the header.
func TestRefusedLoginsBehindTrustedProxy(t *testing.T) {
	t.Parallel()
	proxies, err := clientip.Parse([]string{"10.0.0.0/8"})
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{now: time.Date(2026, 12, 1, 12, 0, 5, 0, time.UTC)}
	e := newEnv(t, withNow(clock.Now), func(c *api.Config) { c.TrustedProxies = proxies })
	from := func(remote, xff, secret string) *resp {
		req := httptest.NewRequest(http.MethodGet, "/api/v1/queues", nil)
		req.RemoteAddr = remote
		if xff != "" {
			req.Header.Set("X-Forwarded-For", xff)
		}
		if secret != "" {
			req.Header.Set("Authorization", "Bearer "+secret)
		}
		rec := httptest.NewRecorder()
		e.srv.Config.Handler.ServeHTTP(rec, req)
		r := &resp{req: req, status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
		checkResponse(t, req, r)
		return r
	}
	const proxy = "10.0.0.2:443"
	// The attacker behind the proxy spends its budget...
	for range 30 {
		from(proxy, "192.0.2.66", "")
	}
	from(proxy, "192.0.2.66", "").problem(t, http.StatusTooManyRequests, "")
	// ...and another client behind the same proxy is not throttled.
	from(proxy, "198.51.100.20", "").problem(t, http.StatusUnauthorized, "")
	from(proxy, "198.51.100.20", e.viewer).want(t, http.StatusOK)
	// A direct client's X-Forwarded-For is ignored: it is counted as itself.
	from("203.0.113.1:1", "198.51.100.20", "").problem(t, http.StatusUnauthorized, "")

	e.srv.Close()
	if err := e.api.Close(); err != nil {
		t.Fatal(err)
	}
	subjects := map[string]bool{}
	for _, ev := range e.refusedEvents() {
		subjects[ev.Subject] = true
	}
	if len(subjects) != 3 || !subjects["192.0.2.66"] || !subjects["198.51.100.20"] || !subjects["203.0.113.1"] {
		t.Fatalf("auth.refused subjects %v, want 192.0.2.66 and 198.51.100.20 (behind the proxy) and 203.0.113.1 (direct)", subjects)
	}
}

// TestRefusedLoginsGlobalBudget spreads a flood of wrong tokens over many
// addresses, one each: past the global budget (600 a minute) the wrong
// ones are 429 with Retry-After, from addresses never refused before
// too, while a valid token is served from a flooding address and from a
// new one. Each address still gets one auth.refused event.
func TestRefusedLoginsGlobalBudget(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{now: time.Date(2026, 12, 1, 12, 0, 5, 0, time.UTC)} // no time passes: nothing refills
	e := newEnv(t, withNow(clock.Now))
	wrong, _ := quarantine.NewTokenSecret()
	const flood = 650
	addr := func(i int) string { return fmt.Sprintf("198.18.%d.%d:1000", i/200, i%200+1) }
	counts := map[int]int{}
	for i := range flood {
		r := e.serveFrom(addr(i), http.MethodGet, "/api/v1/queues", wrong)
		counts[r.status]++
		switch r.status {
		case http.StatusUnauthorized:
			r.problem(t, r.status, "")
			if counts[http.StatusTooManyRequests] > 0 {
				t.Fatalf("address %d refused with 401 after the budget was spent", i)
			}
		case http.StatusTooManyRequests:
			r.problem(t, r.status, "")
			if n, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || n != 1 {
				t.Fatalf("Retry-After %q, want 1 (the global budget refills one every 100 ms)", r.header.Get("Retry-After"))
			}
		default:
			t.Fatalf("wrong token from address %d: status %d", i, r.status)
		}
	}
	if counts[http.StatusUnauthorized] != 600 || counts[http.StatusTooManyRequests] != flood-600 {
		t.Fatalf("%d wrong tokens from as many addresses answered %v, want 600 × 401 then 429", flood, counts)
	}
	e.serveFrom(addr(flood-1), http.MethodGet, "/api/v1/queues", e.viewer).want(t, http.StatusOK)
	e.serveFrom("203.0.113.77:1", http.MethodGet, "/api/v1/queues", e.operator).want(t, http.StatusOK)
	e.serveFrom("203.0.113.78:1", http.MethodGet, "/api/v1/queues", "").problem(t, http.StatusTooManyRequests, "")
	// After a while the budget is back for everyone.
	clock.Add(time.Second)
	e.serveFrom("203.0.113.78:1", http.MethodGet, "/api/v1/queues", "").problem(t, http.StatusUnauthorized, "")

	e.srv.Close()
	if err := e.api.Close(); err != nil {
		t.Fatal(err)
	}
	clients := map[string]bool{}
	var seq int64
	for {
		evs, err := e.store.ListAudit(t.Context(), quarantine.AuditFilter{Action: api.ActionAuthRefused, Seq: seq, Limit: quarantine.MaxLimit})
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 {
			break
		}
		for _, ev := range evs {
			clients[ev.Subject] = true
			seq = ev.Seq
		}
	}
	if len(clients) != flood+1 || !clients["198.18.0.1"] || !clients["203.0.113.78"] {
		t.Fatalf("auth.refused events of %d addresses, want one per refused address (%d)", len(clients), flood+1)
	}
}

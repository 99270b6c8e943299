package storetest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/alert"
	"github.com/quarantine-dev/quarantine/api"
	"github.com/quarantine-dev/quarantine/store"
	"github.com/quarantine-dev/quarantine/web"
)

// BurstNow is the clock of the burst benchmarks: half a minute into a
// minute, right after the burst's last dead letter was collected. Fixed,
// so that a seeded database can be reused.
var BurstNow = time.Date(2025, 7, 1, 12, 0, 30, 0, time.UTC)

// BurstNewest and BurstSpan place a burst's failed_at: spread over the
// span before the newest, each collected a minute after it failed, so
// that every message was collected within the hour before BurstNow.
var (
	BurstNewest = BurstNow.Add(-time.Minute)
	BurstSpan   = 59 * time.Minute
)

// burstMsg is message i of a burst (see BurstNewest): 20 queues, 5
// owners, 200-byte payloads.
func burstMsg(source string, i int) *quarantine.Message {
	h := uint64(i)*0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019
	h ^= h >> 29
	failed := BurstNewest.Add(-time.Duration(h%uint64(BurstSpan/time.Microsecond)) * time.Microsecond)
	m := seedMsg(source, i)
	m.Payload = []byte(fmt.Sprintf(`{"order_id":"o-%d","pad":"%s"}`, i, strings.Repeat("x", 160)))
	m.FailedAt, m.CollectedAt = failed, failed.Add(time.Minute)
	return m
}

// SeedBurst inserts n messages collected within the hour before BurstNow
// through InsertBatch, in batches of 1000, as collectors would; batches
// already stored are skipped (idempotent per (n, source)).
func SeedBurst(tb testing.TB, s store.Store, n int, source string) {
	tb.Helper()
	ctx := tb.Context()
	batches := (n + seedBatch - 1) / seedBatch
	lo := firstUnseeded(tb, s, n, source)
	t0 := time.Now()
	for b := lo; b < batches; b++ {
		msgs := make([]*quarantine.Message, 0, seedBatch)
		for i := b * seedBatch; i < min((b+1)*seedBatch, n); i++ {
			msgs = append(msgs, burstMsg(source, i))
		}
		if _, err := s.InsertBatch(ctx, msgs); err != nil {
			tb.Fatal(err)
		}
		if (b+1)%100 == 0 {
			tb.Logf("seeded %d of %d in %v", (b+1)*seedBatch, n, time.Since(t0).Round(time.Second))
		}
	}
}

// BurstPath is one GET measured by BenchBurst.
type BurstPath struct {
	Name, Path string
	UI         bool // served by the web UI (logged in), else by the API (bearer token)
}

// BurstPaths are the reads BenchBurst measures: the queue list, the
// overview and a /metrics scrape, and the other first pages of the API
// and the UI.
var BurstPaths = []BurstPath{
	{"api-queues", "/api/v1/queues", false},
	{"overview", "/overview", true},
	{"metrics", "/metrics", false},
	{"api-messages", "/api/v1/messages?limit=50", false},
	{"api-groups", "/api/v1/groups", false},
	{"api-queues-team", "/api/v1/queues?owner=team-3", false},
	{"api-queues-status", "/api/v1/queues?status=quarantined", false},
	{"api-alarms", "/api/v1/alarms", false},
	{"api-replays", "/api/v1/replays", false},
	{"api-audit", "/api/v1/audit", false},
	{"messages", "/messages", true},
	{"messages-queue", "/messages?queue=queue-03&status=quarantined", true},
	{"groups", "/groups", true},
	{"sample", "/messages/sample", true},
	{"replays", "/replays", true},
	{"audit", "/audit", true},
}

// BurstCalls is QUARANTINE_BENCH_CALLS, default 20: the calls per read
// of BenchBurst.
func BurstCalls(tb testing.TB) int {
	tb.Helper()
	v := os.Getenv("QUARANTINE_BENCH_CALLS")
	if v == "" {
		return 20
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		tb.Fatalf("QUARANTINE_BENCH_CALLS=%q: want a positive number", v)
	}
	return n
}

// BenchBurst measures, on a store seeded with a burst (SeedBurst, or
// internal/pgseed.SeedWindow with BurstNewest and BurstSpan) and whose
// clock is BurstNow, the reads of BurstPaths through the real API
// and UI handlers (the API's registry with the alert gauges on
// /metrics, as serve wires them), in process: the handler's time from
// the request to the last byte, p50 and p99 (ms) over calls requests
// after 3 warm-up ones. It checks first that the queues' 1-hour inflow
// is the rows collected. Run with -benchtime=1x.
func BenchBurst(b *testing.B, s store.Store, rows, calls int) {
	ctx := b.Context()
	stats, err := s.QueueStats(ctx, quarantine.Filter{}, BurstNow)
	if err != nil {
		b.Fatal(err)
	}
	var in1, in24 int64
	for _, st := range stats {
		in1, in24 = in1+st.Inflow1h, in24+st.Inflow24h
	}
	if in1 != int64(rows) || in24 != int64(rows) {
		b.Fatalf("1-hour inflow %d, 24-hour inflow %d: want the %d messages collected", in1, in24, rows)
	}
	now := func() time.Time { return BurstNow }
	var owners []quarantine.OwnerRule
	for t := range 5 {
		r := quarantine.OwnerRule{Team: fmt.Sprintf("team-%d", t)}
		for k := t; k < 20; k += 5 {
			r.Queues = append(r.Queues, fmt.Sprintf("queue-%02d", k))
		}
		owners = append(owners, r)
	}
	reg := prometheus.NewRegistry()
	alert.RegisterGauges(reg, s, func(q string) string { return quarantine.AssignOwner(owners, q) }, now)
	apiH := api.New(api.Config{Store: s, Now: now, Owners: owners, Registry: reg}).Handler()
	webH, err := web.New(web.Config{Store: s, Now: now, Owners: owners,
		Alarms: []alert.Rule{{Name: "age", Queues: []string{"*"}, MaxAge: 24 * time.Hour, Receivers: []string{"x"}},
			{Name: "fast", Queues: []string{"queue-0*"}, MaxAge: time.Hour, Receivers: []string{"x"}}}})
	if err != nil {
		b.Fatal(err)
	}
	secret, hash := quarantine.NewTokenSecret()
	tok := &quarantine.Token{Name: "burst-" + quarantine.NewID(time.Now()), Role: quarantine.RoleAdmin, SecretHash: hash}
	if err := s.CreateToken(ctx, tok, "bench"); err != nil {
		b.Fatal(err)
	}
	login := httptest.NewRecorder()
	webH.ServeHTTP(login, httptest.NewRequest(http.MethodGet, "/?token="+url.QueryEscape(secret), nil))
	cookies := login.Result().Cookies()
	if login.Code != http.StatusSeeOther || len(cookies) == 0 {
		b.Fatalf("login: %d", login.Code)
	}
	serve := func(p BurstPath) time.Duration {
		req := httptest.NewRequest(http.MethodGet, p.Path, nil)
		h := apiH
		if p.UI {
			h = webH
			for _, c := range cookies {
				req.AddCookie(c)
			}
		} else {
			req.Header.Set("Authorization", "Bearer "+secret)
		}
		w := httptest.NewRecorder()
		t0 := time.Now()
		h.ServeHTTP(w, req)
		d := time.Since(t0)
		if w.Code != http.StatusOK || w.Body.Len() == 0 {
			b.Fatalf("%s: %d %.300s", p.Path, w.Code, w.Body.String())
		}
		return d
	}
	b.ResetTimer()
	var report strings.Builder
	fmt.Fprintf(&report, "%d calls each\n%-18s %10s %10s\n", calls, "read", "p50", "p99")
	for _, p := range BurstPaths {
		for range 3 {
			serve(p)
		}
		ds := make([]time.Duration, calls)
		for i := range ds {
			ds[i] = serve(p)
		}
		p50, p99 := percentiles(ds)
		b.ReportMetric(p50/1e3, p.Name+"-p50-ms")
		b.ReportMetric(p99/1e3, p.Name+"-p99-ms")
		fmt.Fprintf(&report, "%-18s %8.2fms %8.2fms\n", p.Name, p50/1e3, p99/1e3)
	}
	// Printed, not logged: a benchmark's log is cut after a few lines.
	fmt.Print(report.String())
}

package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/alert"
	"github.com/quarantine-dev/quarantine/internal/pgseed"
	"github.com/quarantine-dev/quarantine/internal/pgtest"
	"github.com/quarantine-dev/quarantine/store/postgres"
	"github.com/quarantine-dev/quarantine/store/storetest"
	"github.com/quarantine-dev/quarantine/web"
)

// benchNow is the clock of BenchmarkPages: a minute after the newest
// seeded message was collected, so that the last day's inflow is the
// seed's (a thirtieth of it).
var benchNow = time.Date(2025, 6, 1, 0, 2, 0, 0, time.UTC)

// benchAuditEvents is the length of the audit chain the benchmark keeps.
const benchAuditEvents = 2000

// benchPage is one page of BenchmarkPages and the bare store call it
// mostly is (the baseline of its ratio).
type benchPage struct {
	name, path string
	bare       func(ctx context.Context) error
}

// BenchmarkPages measures the server-side time of the UI's pages (the
// handler from the request to the last byte written, store queries
// included) on QUARANTINE_BENCH_ROWS (default 1,000,000) messages on
// PostgreSQL, seeded once per machine in the persistent schema
// web_bench_<rows>, with a chain of 2000 audit events: p50 and p99 over
// QUARANTINE_BENCH_CALLS (default 200) requests each, and the ratio of
// each page's p50 to its bare store calls' (the page's store work alone).
// The target is under 50 ms.
// Run with -benchtime=1x.
func BenchmarkPages(b *testing.B) {
	rows := storetest.EnvCount(b, "QUARANTINE_BENCH_ROWS", 1_000_000)
	calls := 200
	if v := os.Getenv("QUARANTINE_BENCH_CALLS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("QUARANTINE_BENCH_CALLS=%q: want a positive number", v)
		}
		calls = n
	}
	ctx := context.Background()
	s, err := postgres.Open(ctx, pgtest.PersistentURL(b, "web_bench_"+strconv.Itoa(rows)))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	pgseed.Seed(b, s.Pool(), rows)
	head, err := s.AuditHead(ctx)
	if err != nil {
		b.Fatal(err)
	}
	for i := head.Seq; i < benchAuditEvents; i++ {
		ev := quarantine.NewAuditEvent("bench", quarantine.ActionEdit, fmt.Sprintf("0%025X", i),
			map[string]any{"version": 2, "reason": "bench"})
		if _, err := s.AppendAudit(ctx, ev); err != nil {
			b.Fatal(err)
		}
	}

	// The seed's owners: queue-k belongs to team-(k%5).
	var owners []quarantine.OwnerRule
	for t := range 5 {
		r := quarantine.OwnerRule{Team: "team-" + strconv.Itoa(t)}
		for k := t; k < 20; k += 5 {
			r.Queues = append(r.Queues, fmt.Sprintf("queue-%02d", k))
		}
		owners = append(owners, r)
	}
	h, err := web.New(web.Config{Store: s, Now: func() time.Time { return benchNow }, Owners: owners,
		Alarms: []alert.Rule{{Name: "age", Queues: []string{"*"}, MaxAge: 24 * time.Hour, Receivers: []string{"x"}},
			{Name: "fast", Queues: []string{"queue-0*"}, MaxAge: time.Hour, Receivers: []string{"x"}}}})
	if err != nil {
		b.Fatal(err)
	}
	secret, hash := quarantine.NewTokenSecret()
	tok := &quarantine.Token{Name: "bench-" + quarantine.NewID(time.Now()), Role: quarantine.RoleAdmin, SecretHash: hash}
	if err := s.CreateToken(ctx, tok, "bench"); err != nil {
		b.Fatal(err)
	}
	login := httptest.NewRecorder()
	h.ServeHTTP(login, httptest.NewRequest(http.MethodGet, "/?token="+url.QueryEscape(secret), nil))
	cookies := login.Result().Cookies()
	if login.Code != http.StatusSeeOther || len(cookies) == 0 {
		b.Fatalf("login: %d", login.Code)
	}

	id := fmt.Sprintf("0%025X", rows/2+7)
	var queues []string
	for k := range 20 {
		queues = append(queues, fmt.Sprintf("queue-%02d", k))
	}
	hourly := make([]time.Time, 25)
	for i := range hourly {
		hourly[i] = benchNow.Add(time.Duration(i-24) * time.Hour)
	}
	ages := []time.Time{}
	for _, d := range []time.Duration{24 * 60, 12 * 60, 6 * 60, 3 * 60, 60, 30, 15, 5, 0} {
		ages = append(ages, benchNow.Add(-d*time.Minute))
	}
	queue := quarantine.Filter{Queue: []string{"queue-03"}, Status: []quarantine.Status{quarantine.StatusQuarantined}, Limit: 50}
	pages := []benchPage{
		{"overview", "/overview", func(ctx context.Context) error {
			// The page's store calls: counts, oldest, the two histograms
			// of the seed's 20 queues, the alarm states.
			if _, err := s.CountByQueue(ctx, quarantine.Filter{}); err != nil {
				return err
			}
			if _, err := s.OldestQuarantined(ctx); err != nil {
				return err
			}
			for _, r := range []quarantine.HistogramRequest{{Kind: quarantine.HistogramInflow, Queues: queues, Edges: hourly},
				{Kind: quarantine.HistogramWaiting, Queues: queues, Edges: ages}} {
				if _, err := s.Histogram(ctx, r); err != nil {
					return err
				}
			}
			_, err := s.AlarmStates(ctx)
			return err
		}},
		{"messages", "/messages", func(ctx context.Context) error {
			_, err := s.ListMessages(ctx, quarantine.Filter{Limit: 50})
			return err
		}},
		{"messages-filtered", "/messages?queue=queue-03&status=quarantined", func(ctx context.Context) error {
			_, err := s.ListMessages(ctx, queue)
			return err
		}},
		{"message", "/messages/" + id, func(ctx context.Context) error {
			_, err := s.GetMessage(ctx, id)
			return err
		}},
		{"audit", "/audit", func(ctx context.Context) error {
			_, err := s.ListAudit(ctx, quarantine.AuditFilter{Limit: 50})
			return err
		}},
		{"audit-filtered", "/audit?action=message.edit&actor=bench", func(ctx context.Context) error {
			_, err := s.ListAudit(ctx, quarantine.AuditFilter{Action: quarantine.ActionEdit, Actor: "bench", Limit: 50})
			return err
		}},
	}
	serve := func(path string) time.Duration {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		for _, c := range cookies {
			req.AddCookie(c)
		}
		w := httptest.NewRecorder()
		t0 := time.Now()
		h.ServeHTTP(w, req)
		d := time.Since(t0)
		if w.Code != http.StatusOK || w.Body.Len() == 0 {
			b.Fatalf("%s: %d %.300s", path, w.Code, w.Body.String())
		}
		return d
	}
	b.ResetTimer()
	var report strings.Builder
	fmt.Fprintf(&report, "%d messages, %d audit events, %d calls each\n%-18s %9s %9s %9s %7s\n", rows, benchAuditEvents, calls,
		"page", "p50", "p99", "bare p50", "ratio")
	for _, p := range pages {
		for range 5 { // warm the caches and the chain's verification
			serve(p.path)
		}
		pageTimes, bareTimes := make([]time.Duration, calls), make([]time.Duration, calls)
		for i := range calls {
			pageTimes[i] = serve(p.path)
			t0 := time.Now()
			if err := p.bare(ctx); err != nil {
				b.Fatal(err)
			}
			bareTimes[i] = time.Since(t0)
		}
		p50, p99 := pct(pageTimes, 50), pct(pageTimes, 99)
		bare := pct(bareTimes, 50)
		ratio := float64(p50) / float64(max(bare, time.Microsecond))
		fmt.Fprintf(&report, "%-18s %9s %9s %9s %6.1fx\n", p.name, p50.Round(10*time.Microsecond), p99.Round(10*time.Microsecond),
			bare.Round(10*time.Microsecond), ratio)
		b.ReportMetric(float64(p50)/1e6, p.name+"-p50-ms")
		b.ReportMetric(float64(p99)/1e6, p.name+"-p99-ms")
		if p99 > 50*time.Millisecond {
			fmt.Fprintf(&report, "  %s: p99 %s is over the 50 ms target\n", p.name, p99.Round(time.Millisecond))
		}
	}
	b.Log("\n" + report.String())
}

// pct is the p-th percentile of ds (sorted in place).
func pct(ds []time.Duration, p int) time.Duration {
	slices.Sort(ds)
	return ds[min(len(ds)-1, len(ds)*p/100)]
}

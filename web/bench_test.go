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

// The page benchmarks (BenchmarkPages, BenchmarkMessageViews,
// BenchmarkEditReplayPages) measure the server-side time of the UI's
// pages: the handler from the request to the last byte written, store
// queries included, no network. They run on QUARANTINE_BENCH_ROWS
// (default 1,000,000) messages on PostgreSQL, seeded once per machine in
// the persistent schema web_bench_<rows> (internal/pgseed), and report
// for each page the p50 and p99 over QUARANTINE_BENCH_CALLS (default 200)
// requests and the ratio of its p50 to the p50 of its bare store calls
// (the page's store work alone), measured in the same run. The target is
// under 50 ms. Run them with -benchtime=1x under the bench lock:
//
//	flock /tmp/quarantine-bench.lock go test -run '^$' -bench 'Pages$|Views$' -benchtime=1x ./web/

// benchNow is the clock of BenchmarkPages: a minute after the newest
// seeded message was collected, so that the last day's inflow is the
// seed's (a thirtieth of it).
var benchNow = time.Date(2025, 6, 1, 0, 2, 0, 0, time.UTC)

// benchAuditEvents is the length of the audit chain the benchmark keeps.
const benchAuditEvents = 2000

// benchPage is one page of a page benchmark and the bare store calls it
// mostly is (the baseline of its ratio).
type benchPage struct {
	name, path string
	bare       func(ctx context.Context) error
}

// openBench opens the seeded store of the page benchmarks.
func openBench(b *testing.B) (*postgres.Store, int) {
	b.Helper()
	rows := storetest.EnvCount(b, "QUARANTINE_BENCH_ROWS", 1_000_000)
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
	return s, rows
}

// benchServer is a UI handler logged in as an admin, serving GETs.
type benchServer struct {
	b       *testing.B
	h       http.Handler
	cookies []*http.Cookie
}

// loginBench creates an admin token on s and logs in to h with it.
func loginBench(b *testing.B, s *postgres.Store, h http.Handler) *benchServer {
	b.Helper()
	return loginBenchAs(b, s, h, quarantine.RoleAdmin)
}

// loginBenchAs creates a token of role scoped to owners (none: every
// owner) on s and logs in to h with it.
func loginBenchAs(b *testing.B, s *postgres.Store, h http.Handler, role quarantine.Role, owners ...string) *benchServer {
	b.Helper()
	secret, hash := quarantine.NewTokenSecret()
	tok := &quarantine.Token{Name: "bench-" + quarantine.NewID(time.Now()), Role: role, Owners: owners, SecretHash: hash}
	if err := s.CreateToken(context.Background(), tok, "bench"); err != nil {
		b.Fatal(err)
	}
	login := httptest.NewRecorder()
	h.ServeHTTP(login, httptest.NewRequest(http.MethodGet, "/?token="+url.QueryEscape(secret), nil))
	cookies := login.Result().Cookies()
	if login.Code != http.StatusSeeOther || len(cookies) == 0 {
		b.Fatalf("login: %d", login.Code)
	}
	return &benchServer{b: b, h: h, cookies: cookies}
}

// serve renders path and returns the handler's time; anything but a 200
// with a body fails the benchmark.
func (bs *benchServer) serve(path string) time.Duration {
	req := httptest.NewRequest(http.MethodGet, path, nil)
	for _, c := range bs.cookies {
		req.AddCookie(c)
	}
	w := httptest.NewRecorder()
	t0 := time.Now()
	bs.h.ServeHTTP(w, req)
	d := time.Since(t0)
	if w.Code != http.StatusOK || w.Body.Len() == 0 {
		bs.b.Fatalf("%s: %d %.300s", path, w.Code, w.Body.String())
	}
	return d
}

// benchCalls is QUARANTINE_BENCH_CALLS, default 200.
func benchCalls(b *testing.B) int {
	b.Helper()
	v := os.Getenv("QUARANTINE_BENCH_CALLS")
	if v == "" {
		return 200
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("QUARANTINE_BENCH_CALLS=%q: want a positive number", v)
	}
	return n
}

// measurePages renders each page (after 5 warm-up renders) calls times,
// alternating with its bare store calls, reports the p50 and p99 in ms of
// each as metrics <page>-p50-ms and <page>-p99-ms, and logs a table
// headed by head with the ratio of each page's p50 to its bare calls'.
func measurePages(b *testing.B, bs *benchServer, head string, calls int, pages []benchPage) {
	b.Helper()
	ctx := context.Background()
	b.ResetTimer()
	var report strings.Builder
	fmt.Fprintf(&report, "%s, %d calls each\n%-18s %9s %9s %9s %7s\n", head, calls, "page", "p50", "p99", "bare p50", "ratio")
	for _, p := range pages {
		for range 5 { // warm the caches and the chain's verification
			bs.serve(p.path)
		}
		pageTimes, bareTimes := make([]time.Duration, calls), make([]time.Duration, calls)
		for i := range calls {
			pageTimes[i] = bs.serve(p.path)
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

// seedAgeHistory fills the age history of the week before benchNow as
// the sampler would have: a sample a minute of each of the seed's 20
// queues (its owner team-(k%5)), folded by quarter of an hour, once per
// schema.
func seedAgeHistory(b *testing.B, s *postgres.Store) {
	b.Helper()
	ctx := context.Background()
	from := benchNow.Add(-quarantine.DefaultAgeHistoryKeep)
	// The rows of the queues, not the steps: a schema migrated from
	// per-minute samples has its steps counted, but no queue row.
	var have int64
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM age_step_queues WHERE step >= $1 AND step < $2 AND all_owners`,
		from, benchNow).Scan(&have); err != nil {
		b.Fatal(err)
	}
	if have >= 20*int64(quarantine.DefaultAgeHistoryKeep/quarantine.AgeHistoryStep) {
		return
	}
	for _, q := range []string{
		`INSERT INTO age_sample_runs (minute, sampled_at)
			SELECT t, t + interval '1 second' FROM generate_series($1::timestamptz, $2::timestamptz - interval '1 minute', interval '1 minute') t
			ON CONFLICT DO NOTHING`,
		`INSERT INTO age_steps (step, samples)
			SELECT t, 15 FROM generate_series($1::timestamptz, $2::timestamptz - interval '15 minutes', interval '15 minutes') t
			ON CONFLICT DO NOTHING`,
		`INSERT INTO age_step_queues (step, all_owners, queue, owner, age_us, waiting)
			SELECT t, a, 'queue-' || lpad(k::text, 2, '0'), CASE WHEN a THEN '' ELSE 'team-' || (k % 5) END,
				(extract(epoch FROM t - timestamptz '2025-05-02 00:00:00+00' - k * interval '1 hour') * 1000000)::bigint, 35000
			FROM generate_series($1::timestamptz, $2::timestamptz - interval '15 minutes', interval '15 minutes') t,
				generate_series(0, 19) k, (VALUES (true), (false)) o(a)
			ON CONFLICT DO NOTHING`,
		`VACUUM ANALYZE age_steps`, `VACUUM ANALYZE age_step_queues`,
	} {
		args := []any{from, benchNow}
		if strings.HasPrefix(q, "VACUUM") {
			args = nil
		}
		if _, err := s.Pool().Exec(ctx, q, args...); err != nil {
			b.Fatalf("%.60s: %v", q, err)
		}
	}
}

// BenchmarkPages measures the overview, the message lists, a message and
// the audit pages, with a chain of 2000 audit events and a week of age
// samples (a sample a minute of each of the seed's 20 queues).
func BenchmarkPages(b *testing.B) {
	s, rows := openBench(b)
	calls := benchCalls(b)
	ctx := context.Background()
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
	seedAgeHistory(b, s)

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
	bs := loginBench(b, s, h)

	id := fmt.Sprintf("0%025X", rows/2+7)
	var queues []string
	for k := range 20 {
		queues = append(queues, fmt.Sprintf("queue-%02d", k))
	}
	// The overview's edges: the sparklines' clock hours up to now, the
	// age chart's buckets, the age history's quarters of an hour.
	top := benchNow.Truncate(time.Hour)
	var hourly []time.Time
	for i := 23; i >= 0; i-- {
		hourly = append(hourly, top.Add(-time.Duration(i)*time.Hour))
	}
	hourly = append(hourly, benchNow)
	ages := []time.Time{}
	for _, d := range []time.Duration{24 * 60, 12 * 60, 6 * 60, 3 * 60, 60, 30, 15, 5, 0} {
		ages = append(ages, benchNow.Add(-d*time.Minute))
	}
	last := benchNow.Add(-time.Microsecond)
	history := quarantine.AgeHistoryRequest{From: last.Add(-95 * quarantine.AgeHistoryStep), To: last}
	queue := quarantine.Filter{Queue: []string{"queue-03"}, Status: []quarantine.Status{quarantine.StatusQuarantined}, Limit: 50}
	pages := []benchPage{
		{"overview", "/overview", func(ctx context.Context) error {
			// The page's store calls: counts, oldest, the two histograms
			// of the seed's 20 queues, the alarm states, the age history.
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
			if _, err := s.AlarmStates(ctx); err != nil {
				return err
			}
			_, err := s.AgeHistory(ctx, history)
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
	measurePages(b, bs, fmt.Sprintf("%d messages, %d audit events", rows, benchAuditEvents), calls, pages)

	// A viewer of one team sees its 4 queues: QueueStats finds their
	// oldest messages of its owner.
	team := []string{"team-3"}
	var teamQueues []string
	for k := 3; k < 20; k += 5 {
		teamQueues = append(teamQueues, fmt.Sprintf("queue-%02d", k))
	}
	scoped := history
	scoped.Owners = team
	measurePages(b, loginBenchAs(b, s, h, quarantine.RoleViewer, team...), "the overview of a viewer of team-3", calls, []benchPage{
		{"overview-team", "/overview", func(ctx context.Context) error {
			if _, err := s.QueueStats(ctx, quarantine.Filter{Owner: team}, benchNow); err != nil {
				return err
			}
			for _, r := range []quarantine.HistogramRequest{{Kind: quarantine.HistogramInflow, Queues: teamQueues, Owners: team, Edges: hourly},
				{Kind: quarantine.HistogramWaiting, Queues: teamQueues, Owners: team, Edges: ages}} {
				if _, err := s.Histogram(ctx, r); err != nil {
					return err
				}
			}
			if _, err := s.AlarmStates(ctx); err != nil {
				return err
			}
			_, err := s.AgeHistory(ctx, scoped)
			return err
		}},
	})
}

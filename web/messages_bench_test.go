package web_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/pgseed"
	"github.com/quarantine-dev/quarantine/internal/pgtest"
	"github.com/quarantine-dev/quarantine/store/postgres"
	"github.com/quarantine-dev/quarantine/store/storetest"
	"github.com/quarantine-dev/quarantine/web"
)

// pageSamples is how many timed renders of each page one run makes.
const pageSamples = 100

// BenchmarkMessageViews renders the pages of the messages area on
// PostgreSQL holding QUARANTINE_BENCH_ROWS (default 1,000,000) messages,
// seeded once per machine in the persistent schema web_bench_<rows>
// (internal/pgseed, shared with BenchmarkPages), and reports the p50 and p99 in µs of each page
// rendered by the handler (no network), and the ratio of its p50 to the
// p50 of the bare store call it makes (the baseline, measured in the same
// run):
//
//   - list: /messages (ListMessages, limit 50);
//   - qlist: /messages?queue=queue-03&status=quarantined;
//   - deep: a page about 90% into the order (by its cursor);
//   - groups: /groups (Groups, limit 50);
//   - message: /messages/{id} (GetMessage; the page adds versions,
//     replays and audit);
//   - sample: /messages/sample?size=10 (Sample);
//   - allcount: /messages/bulk?all=1&queue=queue-03 (CountByQueue).
//
// Run with -benchtime=1x under the bench lock.
func BenchmarkMessageViews(b *testing.B) {
	rows := storetest.EnvCount(b, "QUARANTINE_BENCH_ROWS", 1_000_000)
	ctx := context.Background()
	st, err := postgres.Open(ctx, pgtest.PersistentURL(b, "web_bench_"+strconv.Itoa(rows)))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	if err := st.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	pgseed.Seed(b, st.Pool(), rows)
	h, err := web.New(web.Config{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), LoginDelay: time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	secret, hash := quarantine.NewTokenSecret()
	if err := st.CreateToken(ctx, &quarantine.Token{Name: "bench-" + quarantine.NewID(time.Now()), Role: quarantine.RoleAdmin, SecretHash: hash}, "bench"); err != nil {
		b.Fatal(err)
	}
	login := httptest.NewRecorder()
	h.ServeHTTP(login, httptest.NewRequest(http.MethodGet, "/?token="+url.QueryEscape(secret), nil))
	cookies := login.Result().Cookies()
	if login.Code != http.StatusSeeOther || len(cookies) == 0 {
		b.Fatalf("login: %d", login.Code)
	}
	render := func(target string) error {
		req := httptest.NewRequest(http.MethodGet, target, nil)
		for _, c := range cookies {
			req.AddCookie(c)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			return quarantine.Errorf(quarantine.EINTERNAL, "%s: %d", target, rec.Code)
		}
		return nil
	}
	id := fmt.Sprintf("0%025X", rows/3+11) // a seeded message (see pgseed)
	ms, err := st.Sample(ctx, quarantine.SampleRequest{Size: quarantine.MaxSample, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	slices.SortFunc(ms, func(x, y *quarantine.Message) int { return x.FailedAt.Compare(y.FailedAt) })
	deep := quarantine.CursorOf(ms[len(ms)/10])
	q3 := quarantine.Filter{Queue: []string{"queue-03"}, Status: []quarantine.Status{quarantine.StatusQuarantined}, Limit: 50}
	cases := []struct {
		name   string
		page   string
		bare   func() error
		target float64 // ms
	}{
		{"list", "/messages", func() error { _, err := st.ListMessages(ctx, quarantine.Filter{Limit: 50}); return err }, 50},
		{"qlist", "/messages?queue=queue-03&status=quarantined", func() error { _, err := st.ListMessages(ctx, q3); return err }, 50},
		{"deep", "/messages?cursor=" + deep.Encode(), func() error {
			_, err := st.ListMessages(ctx, quarantine.Filter{After: deep, Limit: 50})
			return err
		}, 50},
		{"groups", "/groups", func() error { _, err := st.Groups(ctx, quarantine.Filter{Limit: quarantine.DefaultLimit}); return err }, 50},
		{"message", "/messages/" + id, func() error { _, err := st.GetMessage(ctx, id); return err }, 50},
		{"sample", "/messages/sample?size=10", func() error {
			_, err := st.Sample(ctx, quarantine.SampleRequest{Size: 10, Seed: time.Now().UnixNano()})
			return err
		}, 50},
		{"allcount", "/messages/bulk?all=1&queue=queue-03", func() error {
			_, err := st.CountByQueue(ctx, quarantine.Filter{Queue: []string{"queue-03"}})
			return err
		}, 50},
	}
	for b.Loop() {
		for _, c := range cases {
			if err := render(c.page); err != nil { // warm
				b.Fatal(err)
			}
			pageP50, pageP99 := timedP(b, func() error { return render(c.page) })
			bareP50, _ := timedP(b, c.bare)
			b.ReportMetric(pageP50, c.name+"-p50-µs")
			b.ReportMetric(pageP99, c.name+"-p99-µs")
			b.ReportMetric(pageP50/bareP50, c.name+"/store")
			if pageP50 > c.target*1000 {
				b.Logf("%s: p50 %.1f ms, above the %v ms target", c.name, pageP50/1000, c.target)
			}
		}
	}
}

// timedP calls fn pageSamples times and returns the p50 and p99 in µs.
func timedP(b *testing.B, fn func() error) (p50, p99 float64) {
	b.Helper()
	ds := make([]time.Duration, 0, pageSamples)
	for range pageSamples {
		t0 := time.Now()
		if err := fn(); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(t0))
	}
	slices.Sort(ds)
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	return us(ds[len(ds)/2]), us(ds[len(ds)*99/100])
}

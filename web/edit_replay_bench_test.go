package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/pgseed"
	"github.com/quarantine-dev/quarantine/internal/pgtest"
	"github.com/quarantine-dev/quarantine/store/postgres"
	"github.com/quarantine-dev/quarantine/store/storetest"
	"github.com/quarantine-dev/quarantine/web"
)

// BenchmarkEditReplayPages measures the server-side time of the editor
// and the replay pages as BenchmarkPages does the others: on
// QUARANTINE_BENCH_ROWS (default 1,000,000) messages on PostgreSQL (the
// same persistent seed), p50 and p99 over 200 requests each, and the
// ratio of each page's p50 to its bare store calls'. The replay pages are
// a draft of 500 messages (cancelled at the end). The target is under
// 50 ms. Run with -benchtime=1x.
func BenchmarkEditReplayPages(b *testing.B) {
	rows := storetest.EnvCount(b, "QUARANTINE_BENCH_ROWS", 1_000_000)
	const calls = 200
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
	h, err := web.New(web.Config{Store: s})
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

	page, err := s.ListMessages(ctx, quarantine.Filter{Status: []quarantine.Status{quarantine.StatusQuarantined}, Limit: 500})
	if err != nil {
		b.Fatal(err)
	}
	var ids []string
	for _, m := range page.Messages {
		ids = append(ids, m.ID)
	}
	draft, err := s.CreateReplay(ctx, quarantine.ReplayRequest{IDs: ids, Rate: 10, DryRun: true, Reason: "bench",
		Actor: tok.Actor(), ForceWithoutKey: true}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_, _ = s.ChangeReplay(ctx, quarantine.ReplayChange{BatchID: draft.ID, Action: quarantine.ReplayActCancel, Actor: tok.Actor(), Reason: "bench done"})
	})
	id := ids[len(ids)/2]
	byIDs := url.Values{"ids": ids[:50]}.Encode()
	queue := quarantine.Filter{Queue: []string{"queue-03"}, Status: []quarantine.Status{quarantine.StatusQuarantined}, Limit: 1}
	pages := []benchPage{
		{"edit", "/messages/" + id + "/edit", func(ctx context.Context) error {
			_, err := s.GetMessage(ctx, id)
			return err
		}},
		{"replay-new-ids", "/replays/new?" + byIDs, func(ctx context.Context) error {
			for _, id := range ids[:50] {
				if _, err := s.GetMessage(ctx, id); err != nil {
					return err
				}
			}
			return nil
		}},
		{"replay-new-filter", "/replays/new?queue=queue-03&status=quarantined", func(ctx context.Context) error {
			_, err := s.CountByQueue(ctx, queue)
			return err
		}},
		{"replays", "/replays", func(ctx context.Context) error {
			_, _, err := s.ListReplays(ctx, quarantine.ReplayFilter{Limit: 50})
			return err
		}},
		{"replay", "/replays/" + draft.ID, func(ctx context.Context) error {
			if _, err := s.GetReplay(ctx, draft.ID); err != nil {
				return err
			}
			items, _, err := s.ListReplayItems(ctx, quarantine.ReplayItemFilter{BatchID: draft.ID, After: -1, Limit: 50})
			for _, it := range items {
				if _, err := s.GetMessage(ctx, it.MessageID); err != nil {
					return err
				}
			}
			return err
		}},
		{"replay-progress", "/replays/" + draft.ID + "/progress", func(ctx context.Context) error {
			_, err := s.GetReplay(ctx, draft.ID)
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
	percentile := func(ds []time.Duration, p int) time.Duration {
		slices.Sort(ds)
		return ds[min(len(ds)-1, len(ds)*p/100)]
	}
	b.ResetTimer()
	var report strings.Builder
	fmt.Fprintf(&report, "%d messages, %d calls each\n%-18s %9s %9s %9s %7s\n", rows, calls, "page", "p50", "p99", "bare p50", "ratio")
	for _, p := range pages {
		for range 5 {
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
		p50, p99, bare := percentile(pageTimes, 50), percentile(pageTimes, 99), percentile(bareTimes, 50)
		fmt.Fprintf(&report, "%-18s %9s %9s %9s %6.1fx\n", p.name, p50.Round(10*time.Microsecond), p99.Round(10*time.Microsecond),
			bare.Round(10*time.Microsecond), float64(p50)/float64(max(bare, time.Microsecond)))
		b.ReportMetric(float64(p50)/1e6, p.name+"-p50-ms")
		b.ReportMetric(float64(p99)/1e6, p.name+"-p99-ms")
		if p99 > 50*time.Millisecond {
			fmt.Fprintf(&report, "  %s: p99 %s is over the 50 ms target\n", p.name, p99.Round(time.Millisecond))
		}
	}
	b.Log("\n" + report.String())
}

package postgres_test

import (
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/pgseed"
	"github.com/quarantine-dev/quarantine/internal/pgtest"
	"github.com/quarantine-dev/quarantine/store/storetest"
)

// BenchmarkDiscardChunks discards QUARANTINE_BENCH_ROWS (default 200,000)
// seeded messages (internal/pgseed: 70 % quarantined, the others in the
// other statuses) by one filter, chunk after chunk of 2,000 straight
// through the store (no HTTP, no binary), and reports messages per second
// and the slowest chunk: the store's part of BenchmarkDiscardMillion
// (cmd/quarantine). Each run seeds a schema of its own. Run with
// -benchtime=1x:
//
//	go test -run '^$' -bench '^BenchmarkDiscardChunks$' -benchtime=1x ./store/postgres/
func BenchmarkDiscardChunks(b *testing.B) {
	n := storetest.EnvCount(b, "QUARANTINE_BENCH_ROWS", 200_000)
	for range b.N {
		b.StopTimer()
		s := openURL(b, pgtest.URL(b))
		if err := s.Migrate(b.Context()); err != nil {
			b.Fatal(err)
		}
		pgseed.SeedWindow(b, s.Pool(), n, storetest.BurstNewest, storetest.BurstSpan)
		var matched int
		if err := s.Pool().QueryRow(b.Context(), `SELECT count(*) FROM messages`).Scan(&matched); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		t0 := time.Now()
		op, err := s.StartDiscard(b.Context(), quarantine.Discard{Filter: &quarantine.Filter{}, ExpectCount: &matched, Reason: "incident", Actor: "bench"}, 0)
		if err != nil {
			b.Fatal(err)
		}
		var slowest time.Duration
		for op.State == quarantine.DiscardRunning {
			c0 := time.Now()
			if op, _, err = s.DiscardChunk(b.Context(), op.ID, 2000); err != nil {
				b.Fatal(err)
			}
			slowest = max(slowest, time.Since(c0))
		}
		took := time.Since(t0)
		b.StopTimer()
		if op.Done() != int64(matched) {
			b.Fatalf("operation %+v, want %d done", op, matched)
		}
		b.ReportMetric(float64(matched)/took.Seconds(), "msgs/s")
		b.ReportMetric(float64(slowest.Microseconds())/1e3, "slowest-chunk-ms")
		b.Logf("%d discarded, %d skipped in %v", op.Discarded, op.Skipped, took.Round(time.Millisecond))
	}
}

package postgres_test

import (
	"time"

	"testing"

	"github.com/quarantine-dev/quarantine/internal/pgseed"
	"github.com/quarantine-dev/quarantine/store/postgres"
)

// seed makes sure s holds at least n seeded messages (rows seed-0 ..
// seed-(n-1)): the data set of internal/pgseed, which the web UI's
// benchmarks share.
func seed(tb testing.TB, s *postgres.Store, n int) {
	tb.Helper()
	pgseed.Seed(tb, s.Pool(), n)
}

// BenchmarkSeed seeds the persistent bench schema bench_<rows> of
// QUARANTINE_BENCH_ROWS (default 1,000,000) messages, or finishes a seed
// that stopped, and does nothing else: the other benchmarks of the
// schema then find it seeded. At ten million messages (about 25 GB) the
// seed takes long; run it outside the benchmarks' lock and let it take
// the lock for each million messages and each index build, so that other
// benchmarks run in between:
//
//	QUARANTINE_BENCH_ROWS=10000000 QUARANTINE_BENCH_LOCK=/tmp/quarantine-bench.lock \
//		go test -run '^$' -bench '^BenchmarkSeed$' -benchtime=1x -timeout 3h ./store/postgres/
//
// The schema is kept for later runs; drop it when done
// (DROP SCHEMA bench_10000000 CASCADE).
func BenchmarkSeed(b *testing.B) {
	t0 := time.Now()
	benchStore(b, benchRows(b))
	for b.Loop() {
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(time.Since(t0).Seconds(), "s")
}

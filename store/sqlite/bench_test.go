package sqlite_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine/store/sqlite"
	"github.com/quarantine-dev/quarantine/store/storetest"
)

func benchInsert(b *testing.B, batch int) {
	s := sqlite.OpenTest(b)
	storetest.BenchInsertBatch(b, s, batch)
}

func BenchmarkInsertBatch1(b *testing.B)    { benchInsert(b, 1) }
func BenchmarkInsertBatch100(b *testing.B)  { benchInsert(b, 100) }
func BenchmarkInsertBatch1000(b *testing.B) { benchInsert(b, 1000) }

// benchRows is the seed size of BenchmarkList and BenchmarkOperations:
// QUARANTINE_BENCH_ROWS, or 100,000.
func benchRows(b *testing.B) int { return storetest.EnvCount(b, "QUARANTINE_BENCH_ROWS", 100_000) }

// seeded opens the database seeded with benchRows messages, kept under
// os.TempDir() by seed size so that later runs skip the seeding.
func seeded(b *testing.B) *sqlite.Store {
	n := benchRows(b)
	s := openKept(b, fmt.Sprintf("quarantine-bench-sqlite-%d.db", n))
	storetest.SeedMessages(b, s, n, "bench-seed")
	return s
}

// openKept opens (and migrates) the database file name kept under
// os.TempDir(), closed when b ends.
func openKept(b *testing.B, name string, opts ...sqlite.Option) *sqlite.Store {
	s, err := sqlite.Open(b.Context(), filepath.Join(os.TempDir(), name), opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	if err := s.Migrate(b.Context()); err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkList lists the first and a deep page of the seeded database.
func BenchmarkList(b *testing.B) {
	storetest.BenchList(b, seeded(b))
}

// BenchmarkInsert100k inserts 100,000 messages at batch sizes 1, 100 and
// 1000 (QUARANTINE_BENCH_INSERTS overrides the count) and reports the rates
// and their ratio. Run with -benchtime=1x.
func BenchmarkInsert100k(b *testing.B) {
	storetest.BenchInsertRatio(b, sqlite.OpenTest(b), storetest.EnvCount(b, "QUARANTINE_BENCH_INSERTS", 100_000))
}

// BenchmarkOperations measures list, deep and filtered pages, samples,
// groups and queue stats (p50/p99 over 200 calls each) on the database
// seeded for BenchmarkList (QUARANTINE_BENCH_ROWS, default 100,000). Run
// with -benchtime=1x.
func BenchmarkOperations(b *testing.B) {
	storetest.BenchOperations(b, seeded(b))
}

// BenchmarkBurst measures GET /api/v1/queues, /overview, a /metrics
// scrape and the other first pages (storetest.BenchBurst) with
// QUARANTINE_BENCH_ROWS (here too default 1,000,000) dead letters
// collected within the hour before storetest.BurstNow, inserted through
// InsertBatch once into a database kept under os.TempDir(). Run with
// -benchtime=1x; QUARANTINE_BENCH_CALLS (default 20) calls per read:
//
//	go test -run '^$' -bench '^BenchmarkBurst$' -benchtime=1x -timeout 1h ./store/sqlite/
func BenchmarkBurst(b *testing.B) {
	n := storetest.EnvCount(b, "QUARANTINE_BENCH_ROWS", 1_000_000)
	// Without the background text search indexer: a million documents
	// to index would weigh on the reads measured (none searches text).
	s := openKept(b, fmt.Sprintf("quarantine-burst-sqlite-%d.db", n),
		sqlite.WithClock(func() time.Time { return storetest.BurstNow }), sqlite.WithoutSearchIndexer())
	storetest.SeedBurst(b, s, n, "burst")
	storetest.BenchBurst(b, s, n, storetest.BurstCalls(b))
}

// BenchmarkPin measures a dry run by filter of QUARANTINE_BENCH_ROWS
// (default 1,000,000) messages seeded as for BenchmarkBurst, into a
// database of its own (the inserts made meanwhile would change the
// burst's), with single-message inserts every 20 ms meanwhile
// (storetest.BenchPin). Run once:
//
//	go test -run '^$' -bench '^BenchmarkPin$' -benchtime=1x -timeout 1h ./store/sqlite/
func BenchmarkPin(b *testing.B) {
	n := storetest.EnvCount(b, "QUARANTINE_BENCH_ROWS", 1_000_000)
	s := openKept(b, fmt.Sprintf("quarantine-pin-sqlite-%d.db", n), sqlite.WithoutSearchIndexer())
	storetest.SeedBurst(b, s, n, "burst")
	storetest.BenchPin(b, s, n)
}

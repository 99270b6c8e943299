package sqlite_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

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
	path := filepath.Join(os.TempDir(), fmt.Sprintf("quarantine-bench-sqlite-%d.db", n))
	s, err := sqlite.Open(b.Context(), path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	if err := s.Migrate(b.Context()); err != nil {
		b.Fatal(err)
	}
	storetest.SeedMessages(b, s, n, "bench-seed")
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

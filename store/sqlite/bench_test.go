package sqlite_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
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

// benchRows is the seed size of BenchmarkList: QUARANTINE_BENCH_ROWS, or
// 100,000.
func benchRows(b *testing.B) int {
	if v := os.Getenv("QUARANTINE_BENCH_ROWS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1000 {
			b.Fatalf("QUARANTINE_BENCH_ROWS=%q: want a number of at least 1000", v)
		}
		return n
	}
	return 100_000
}

// BenchmarkList lists the first and a deep page of a seeded database kept
// under os.TempDir() by seed size, so that later runs skip the seeding.
func BenchmarkList(b *testing.B) {
	n := benchRows(b)
	path := filepath.Join(os.TempDir(), fmt.Sprintf("quarantine-bench-sqlite-%d.db", n))
	s, err := sqlite.Open(b.Context(), path)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(b.Context()); err != nil {
		b.Fatal(err)
	}
	storetest.SeedMessages(b, s, n, "bench-seed")
	storetest.BenchList(b, s)
}

// BenchmarkInsert100k inserts 100,000 messages at batch sizes 1, 100 and
// 1000 (QUARANTINE_BENCH_INSERTS overrides the count) and reports the rates
// and their ratio. Run with -benchtime=1x.
func BenchmarkInsert100k(b *testing.B) {
	storetest.BenchInsertRatio(b, sqlite.OpenTest(b), benchInserts(b))
}

func benchInserts(tb testing.TB) int {
	if v := os.Getenv("QUARANTINE_BENCH_INSERTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1000 {
			tb.Fatalf("QUARANTINE_BENCH_INSERTS=%q: want a number of at least 1000", v)
		}
		return n
	}
	return 100_000
}

// BenchmarkOperations measures list, deep and filtered pages, samples,
// groups and queue stats (p50/p99 over 200 calls each) on the database
// seeded for BenchmarkList (QUARANTINE_BENCH_ROWS, default 100,000). The
// embedded store groups on every call, so groups and queue stats grow with
// the seed. Run with -benchtime=1x.
func BenchmarkOperations(b *testing.B) {
	n := benchRows(b)
	path := filepath.Join(os.TempDir(), fmt.Sprintf("quarantine-bench-sqlite-%d.db", n))
	s, err := sqlite.Open(b.Context(), path)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(b.Context()); err != nil {
		b.Fatal(err)
	}
	storetest.SeedMessages(b, s, n, "bench-seed")
	storetest.BenchOperations(b, s)
}

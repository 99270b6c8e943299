package postgres_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/quarantine-dev/quarantine/internal/pgtest"
	"github.com/quarantine-dev/quarantine/store/postgres"
	"github.com/quarantine-dev/quarantine/store/storetest"
)

// benchRows returns QUARANTINE_BENCH_ROWS (default 1,000,000).
func benchRows(tb testing.TB) int { return storetest.EnvCount(tb, "QUARANTINE_BENCH_ROWS", 1_000_000) }

// benchStore opens the persistent schema bench_<rows>, migrated and seeded
// with rows messages (only the missing ones are inserted, so a machine
// seeds it once).
func benchStore(tb testing.TB, rows int) *postgres.Store {
	tb.Helper()
	s := openURL(tb, pgtest.PersistentURL(tb, "bench_"+strconv.Itoa(rows)))
	if err := s.Migrate(context.Background()); err != nil {
		tb.Fatal(err)
	}
	seed(tb, s, rows)
	seedSearch(tb, s) // search_bench_test.go
	return s
}

func benchInsert(b *testing.B, batch int) {
	s := openStore(b)
	storetest.BenchInsertBatch(b, s, batch)
}

// BenchmarkInsertBatch1 measures InsertBatch one message at a time.
func BenchmarkInsertBatch1(b *testing.B) { benchInsert(b, 1) }

// BenchmarkInsertBatch100 measures InsertBatch 100 messages at a time.
func BenchmarkInsertBatch100(b *testing.B) { benchInsert(b, 100) }

// BenchmarkInsertBatch1000 measures InsertBatch 1000 messages at a time.
func BenchmarkInsertBatch1000(b *testing.B) { benchInsert(b, 1000) }

// BenchmarkList measures the first and a deep page of ListMessages on
// QUARANTINE_BENCH_ROWS (default 1,000,000) seeded messages.
func BenchmarkList(b *testing.B) {
	s := benchStore(b, benchRows(b))
	storetest.BenchList(b, s)
}

// BenchmarkInsert100k inserts 100,000 messages at batch sizes 1, 100 and
// 1000 (QUARANTINE_BENCH_INSERTS overrides the count) into a fresh schema
// and reports the rates and their ratio. Run with -benchtime=1x.
func BenchmarkInsert100k(b *testing.B) {
	storetest.BenchInsertRatio(b, openStore(b), storetest.EnvCount(b, "QUARANTINE_BENCH_INSERTS", 100_000))
}

// BenchmarkOperations measures list, deep and filtered pages, sample(100),
// stratified sample(100), groups and queue stats (p50/p99 over 200 calls
// each) and the ratios deep/first and sample/list, on
// QUARANTINE_BENCH_ROWS (default 1,000,000) messages seeded once per
// machine in the persistent schema bench_<rows>. Run with -benchtime=1x.
func BenchmarkOperations(b *testing.B) {
	s := benchStore(b, benchRows(b))
	storetest.BenchOperations(b, s)
}

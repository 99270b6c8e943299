// Package benchseed seeds a fresh database with a burst of dead letters
// for the benchmarks that run the built binary on a million messages
// (cmd/quarantine's pin and discard, broker/rabbitmq's replay).
package benchseed

import (
	"context"
	"testing"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/pgseed"
	"github.com/quarantine-dev/quarantine/internal/testbin"
	storeopen "github.com/quarantine-dev/quarantine/store/open"
	"github.com/quarantine-dev/quarantine/store/postgres"
	"github.com/quarantine-dev/quarantine/store/storetest"
)

// Seed returns the URL of a new database of kind ("sqlite" or
// "postgres", testbin.BenchDatabase) holding rows messages collected
// within the hour before storetest.BurstNow (SQLite through InsertBatch,
// as collectors store, every one quarantined; PostgreSQL by
// internal/pgseed, which leaves 30% of them in the statuses earlier
// replays and discards left: replaying, replayed, refailed, discarded),
// indexed for text search, and how many messages it holds. The database is closed again: the binary opens it.
func Seed(tb testing.TB, kind string, rows int) (url string, stored int64) {
	tb.Helper()
	ctx := context.Background()
	url = testbin.BenchDatabase(tb, kind)
	st, err := storeopen.Store(ctx, url)
	if err != nil {
		tb.Fatal(err)
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		tb.Fatal(err)
	}
	if pg, ok := st.(*postgres.Store); ok {
		pgseed.SeedWindow(tb, pg.Pool(), rows, storetest.BurstNewest, storetest.BurstSpan)
	} else {
		storetest.SeedBurst(tb, st, rows, "burst")
	}
	// Indexed for text search before serve starts: the indexer's catching
	// up is not what is measured.
	if ix, ok := st.(interface {
		IndexSearch(context.Context, int) (int, error)
	}); ok {
		for {
			n, err := ix.IndexSearch(ctx, 5000)
			if err != nil {
				tb.Fatal(err)
			}
			if n == 0 {
				break
			}
		}
	}
	counts, err := st.CountByQueue(ctx, quarantine.Filter{})
	if err != nil {
		tb.Fatal(err)
	}
	for _, c := range counts {
		stored += c.Count
	}
	return url, stored
}

// EachStore runs bench on each of QUARANTINE_BENCH_STORES (default
// postgres and sqlite) with QUARANTINE_BENCH_ROWS (default 1,000,000)
// messages, b.N times.
func EachStore(b *testing.B, bench func(b *testing.B, kind string, rows int)) {
	rows := storetest.EnvCount(b, "QUARANTINE_BENCH_ROWS", 1_000_000)
	stores, _ := testbin.BenchStores()
	for _, kind := range stores {
		b.Run(kind, func(b *testing.B) {
			for range b.N {
				bench(b, kind, rows)
			}
		})
	}
}

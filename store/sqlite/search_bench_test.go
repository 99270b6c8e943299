package sqlite_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine/store/sqlite"
	"github.com/quarantine-dev/quarantine/store/storetest"
)

// BenchmarkSearchIndexer measures how fast the background indexer can
// make messages searchable: 20,000 messages with distinct 1 KiB payloads
// (QUARANTINE_BENCH_INSERTS overrides the count), then IndexSearch until
// the queue is empty. Run with -benchtime=1x.
func BenchmarkSearchIndexer(b *testing.B) {
	s := sqlite.OpenTest(b, sqlite.WithoutSearchIndexer())
	storetest.BenchSearchIndexer(b, s, storetest.EnvCount(b, "QUARANTINE_BENCH_INSERTS", 20_000))
}

// BenchmarkSearch measures the first page (limit 50) of a text search on
// the database seeded for BenchmarkList (QUARANTINE_BENCH_ROWS, default
// 100,000), once its search index has caught up; p50 and p99 over 200
// calls of each kind of term, a different term each call:
//
//   - rare: an order ID of one payload; rare+queue: with its queue;
//   - customer: a customer ID, in about 1 in 9,973 payloads;
//   - pct1: a reason prefix of about 1 in 101 messages;
//   - frequent: "upstream timeout", in every reason; frequent+queue: with
//     a queue;
//   - none: a term no message holds.
//
// Run with -benchtime=1x.
func BenchmarkSearch(b *testing.B) {
	rows := benchRows(b)
	s := seeded(b)
	for {
		n, err := s.IndexSearch(b.Context(), 1000)
		if err != nil {
			b.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	terms := storetest.SearchTerms(rows, func(n int) string { return fmt.Sprintf(`"o-%d"`, n) },
		storetest.SearchTerm{Name: "customer", Text: func(i int) string { return fmt.Sprintf(`"c-%d"`, i%9973) }, Min: 1, Max: 50})
	storetest.BenchSearch(b, s, terms)
}

// BenchmarkSearchLag measures the search index's lag under a steady
// ingest of 1,000 messages a second for 20 seconds (a collector during an
// incident). Run with -benchtime=1x.
func BenchmarkSearchLag(b *testing.B) {
	storetest.BenchSearchLag(b, sqlite.OpenTest(b), 1000, 20*time.Second)
}

package sqlite_test

import (
	"fmt"
	"testing"

	"github.com/quarantine-dev/quarantine"
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
	rare := func(i int) int { return (i*7919 + 12345) % rows }
	queue := func(n int) string { return fmt.Sprintf("queue-%02d", n%20) }
	terms := []storetest.SearchTerm{
		{Name: "rare", Text: func(i int) string { return fmt.Sprintf(`"o-%d"`, rare(i)) }, Min: 1, Max: 1},
		{Name: "rare+queue", Text: func(i int) string { return fmt.Sprintf(`"o-%d"`, rare(i)) },
			Filter: quarantine.Filter{Queue: []string{queue(rare(0))}}, Max: 1},
		{Name: "customer", Text: func(i int) string { return fmt.Sprintf(`"c-%d"`, i%9973) }, Min: 1, Max: 50},
		{Name: "pct1", Text: func(i int) string { return fmt.Sprintf("failure %d:", i%101) }, Min: 50, Max: 50},
		{Name: "frequent", Text: func(int) string { return "upstream timeout" }, Min: 50, Max: 50},
		{Name: "frequent+queue", Text: func(int) string { return "Upstream TIMEOUT" },
			Filter: quarantine.Filter{Queue: []string{"queue-07"}}, Min: 50, Max: 50},
		{Name: "none", Text: func(i int) string { return fmt.Sprintf("no such thing %d", i) }, Max: 0},
	}
	storetest.BenchSearch(b, s, terms)
}

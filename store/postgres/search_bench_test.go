package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine/store/internal/search"
	"github.com/quarantine-dev/quarantine/store/postgres"
	"github.com/quarantine-dev/quarantine/store/storetest"
)

// seedSearch makes sure the messages of a bench schema are indexed for
// search: internal/pgseed writes the documents of a large seed with the
// messages in set-based SQL (the indexer would fold a million payloads in
// Go, one batch at a time), the indexer those of a small one. It checks a
// few documents against what the indexer writes (search.Doc).
func seedSearch(tb testing.TB, s *postgres.Store) {
	tb.Helper()
	ctx := context.Background()
	for {
		n, err := s.IndexSearch(ctx, 1000)
		if err != nil {
			tb.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	rows, err := s.Pool().Query(ctx, `SELECT d.doc, m.reason, m.job_name, coalesce(pv.payload_text, '')
		FROM search_docs d JOIN messages m ON m.id = d.message_id
		LEFT JOIN payload_versions pv ON pv.message_id = m.id AND pv.version = m.payload_version
		ORDER BY d.message_id LIMIT 20`)
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var doc, reason, job, text string
		if err := rows.Scan(&doc, &reason, &job, &text); err != nil {
			tb.Fatal(err)
		}
		if doc != search.Doc(reason, job, text) {
			tb.Fatalf("a seeded search document is not what the indexer writes: %.80q", doc)
		}
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkSearch measures the first page (limit 50) of a text search on
// QUARANTINE_BENCH_ROWS (default 1,000,000) seeded messages, p50 and p99
// over 200 calls of each kind of term, a different term each call:
//
//   - rare: an order ID of one payload; rare+queue: with its queue;
//   - sku: a SKU, in about 1 in 2,000 payloads;
//   - pct1: a reason prefix of about 1 in 101 messages;
//   - frequent: "upstream timeout", in every reason; frequent+queue: with
//     a queue;
//   - none: a term no message holds.
//
// Run with -benchtime=1x.
func BenchmarkSearch(b *testing.B) {
	rows := benchRows(b)
	s := benchStore(b, rows)
	terms := storetest.SearchTerms(rows, func(n int) string { return fmt.Sprintf(`"idem-%d"`, n) },
		storetest.SearchTerm{Name: "sku", Text: func(i int) string { return fmt.Sprintf(" sku-%d ", i%1000) }, Min: 1, Max: 50})
	storetest.BenchSearch(b, s, terms)
}

// BenchmarkSearchIndexer measures how fast the background indexer can
// make messages searchable: 20,000 messages with distinct 1 KiB payloads
// (QUARANTINE_BENCH_INSERTS overrides the count), then IndexSearch until
// the queue is empty. Run with -benchtime=1x.
func BenchmarkSearchIndexer(b *testing.B) {
	s := openStore(b, postgres.WithoutSearchIndexer())
	storetest.BenchSearchIndexer(b, s, storetest.EnvCount(b, "QUARANTINE_BENCH_INSERTS", 20_000))
}

// BenchmarkSearchLag measures the search index's lag under a steady
// ingest of 1,000 messages a second for 20 seconds (a collector during an
// incident). Run with -benchtime=1x.
func BenchmarkSearchLag(b *testing.B) {
	storetest.BenchSearchLag(b, openStore(b), 1000, 20*time.Second)
}

package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/search"
	"github.com/quarantine-dev/quarantine/store/postgres"
	"github.com/quarantine-dev/quarantine/store/storetest"
)

// seedSearchSQL writes the search documents of the seeded messages in one
// statement, as the indexer would: the seed is ASCII, whose case folding
// is lower() (seedSearch checks a few documents against search.Doc).
const seedSearchSQL = `INSERT INTO search_docs (message_id, failed_at, doc)
SELECT m.id, m.failed_at, lower(m.reason) || chr(31) || lower(m.job_name) || chr(31) || lower(coalesce(pv.payload_text, ''))
FROM messages m
LEFT JOIN payload_versions pv ON pv.message_id = m.id AND pv.version = m.payload_version
WHERE NOT EXISTS (SELECT 1 FROM search_docs d WHERE d.message_id = m.id)
ON CONFLICT (message_id) DO NOTHING`

// seedSearch indexes the seeded messages of a bench schema for search in
// set-based SQL (the indexer would fold a million payloads in Go, one
// batch at a time), building the trigram index after the documents when
// most are missing, then empties the queue and analyzes.
func seedSearch(tb testing.TB, s *postgres.Store) {
	tb.Helper()
	ctx := context.Background()
	var missing int64
	err := s.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM messages) - (SELECT count(*) FROM search_docs)`).Scan(&missing)
	if err != nil {
		tb.Fatal(err)
	}
	if missing > 0 {
		t0 := time.Now()
		conn, err := s.Pool().Acquire(ctx)
		if err != nil {
			tb.Fatal(err)
		}
		defer conn.Release()
		exec := func(q string) {
			tb.Helper()
			if _, err := conn.Exec(ctx, q); err != nil {
				tb.Fatalf("%.60s: %v", q, err)
			}
		}
		exec(`SET maintenance_work_mem = '512MB'`)
		// The queue first: the store's background indexer then has
		// nothing left to write beside this statement.
		exec(`DELETE FROM search_pending`)
		rebuild := missing > 100_000
		if rebuild {
			exec(`DROP INDEX IF EXISTS search_docs_key_idx`)
		}
		exec(seedSearchSQL)
		if rebuild {
			exec(`CREATE INDEX search_docs_key_idx ON search_docs USING gin (key public.gin_trgm_ops)`)
		}
		tb.Logf("indexed %d seeded messages for search in %v", missing, time.Since(t0).Round(time.Second))
	}
	for _, q := range []string{`VACUUM ANALYZE search_docs`, `VACUUM ANALYZE search_pending`} {
		if _, err := s.Pool().Exec(ctx, q); err != nil {
			tb.Fatal(err)
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
	rare := func(i int) int { return (i*7919 + 12345) % rows }
	queue := func(n int) string { return fmt.Sprintf("queue-%02d", n%20) }
	terms := []storetest.SearchTerm{
		{Name: "rare", Text: func(i int) string { return fmt.Sprintf(`"idem-%d"`, rare(i)) }, Min: 1, Max: 1},
		{Name: "rare+queue", Text: func(i int) string { return fmt.Sprintf(`"idem-%d"`, rare(i)) },
			Filter: quarantine.Filter{Queue: []string{queue(rare(0))}}, Max: 1},
		{Name: "sku", Text: func(i int) string { return fmt.Sprintf(" sku-%d ", i%1000) }, Min: 1, Max: 50},
		{Name: "pct1", Text: func(i int) string { return fmt.Sprintf("failure %d:", i%101) }, Min: 50, Max: 50},
		{Name: "frequent", Text: func(int) string { return "upstream timeout" }, Min: 50, Max: 50},
		{Name: "frequent+queue", Text: func(int) string { return "Upstream TIMEOUT" },
			Filter: quarantine.Filter{Queue: []string{"queue-07"}}, Min: 50, Max: 50},
		{Name: "none", Text: func(i int) string { return fmt.Sprintf("no such thing %d", i) }, Max: 0},
	}
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

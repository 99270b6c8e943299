// Package pgseed seeds a PostgreSQL store's schema with a large,
// deterministic set of messages for benchmarks, without going through
// InsertBatch. It is the data set of store/postgres's benchmarks
// (store/postgres/seed_test.go calls it), shared so that other packages' benchmarks
// (web's BenchmarkPages) measure against the same data.
package pgseed

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

const SeedSQL = `
WITH g AS (
	SELECT i,
		'0' || lpad(upper(to_hex(i)), 25, '0') AS id,
		timestamptz '2025-06-01 00:00:00+00' - ((i::bigint * 2654435761) % 2592000000000) * interval '1 microsecond' AS failed_at
	FROM generate_series($1::bigint, $2::bigint) AS i
), ins AS (
	INSERT INTO messages (id, source, source_kind, queue, job_name, message_id, idempotency_key,
		schema_version, attempts, failure_class, reason, payload_size, content_type, payload_sha256,
		payload_version, headers, enqueued_at, first_failed_at, failed_at, collected_at, updated_at,
		status, owner, fingerprint, replay_count, refail_of, flags, dedupe_key)
	SELECT id, 'seed-' || (i % 5), 'memory', 'queue-' || lpad((i % 20)::text, 2, '0'), 'job-' || (i % 7),
		'm-' || i, 'idem-' || i, 'v1', 1 + i % 5,
		(ARRAY['permanent','exhausted','unknown_name','malformed','rejected','expired','delivery_limit','unknown'])[1 + i % 8],
		'seeded failure ' || (i % 101) || ': upstream timeout after ' || (100 + i % 900) || 'ms',
		$3::int, 'application/json', md5(i::text) || md5(i::text), 1, '{"x-seed":"1"}', NULL, NULL,
		failed_at, failed_at + interval '1 minute', failed_at + interval '1 minute',
		CASE WHEN i % 10 < 7 THEN 'quarantined' ELSE (ARRAY['replaying','replayed','refailed','discarded'])[1 + i % 4] END,
		'team-' || (i % 20 % 5), md5('fp' || (i % 300)), 0, '', '[]', 'seed-' || i
	FROM g
	ON CONFLICT DO NOTHING
	RETURNING id, payload_sha256, collected_at, source, idempotency_key
)
INSERT INTO payload_versions (message_id, version, sha256, prev_sha256, size, content_type, actor,
	reason, created_at, payload, payload_text)
SELECT id, 1, payload_sha256, '', $3::int, 'application/json', 'collector:' || source, '', collected_at, NULL,
	rpad('{"order_id":"' || idempotency_key || '","customer":"c-' || (hashtext(id) % 9973) || '","items":"' ||
		repeat(md5(id) || ' sku-' || (hashtext(id) % 1000) || ' ', 20), $3::int - 2) || '"}'
FROM ins`

// seedPayloadSize is the payload size of a seed of n messages: 1 KiB up
// to a million, 200 bytes beyond (ten million 1 KiB payloads would be 10
// GB of payload versions).
func seedPayloadSize(n int) int {
	if n > 1_000_000 {
		return 200
	}
	return 1024
}

// Seed makes sure the schema of pool holds at least n seeded messages
// (rows seed-0 .. seed-(n-1)), inserting the missing ones in chunks, then
// counts them (quarantine_recount: the seed bypasses InsertBatch) and
// analyzes. A large seed into an empty schema drops the secondary indexes
// first and builds them again at the end, which is several times faster
// than keeping them up to date row by row. It reports progress through
// tb.Log for long seeds.
func Seed(tb testing.TB, pool *pgxpool.Pool, n int) {
	tb.Helper()
	ctx := context.Background()
	var have int64
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM messages WHERE source LIKE 'seed-%'`).Scan(&have); err != nil {
		tb.Fatal(err)
	}
	if have >= int64(n) {
		vacuum(tb, pool)
		return
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Release()
	exec := func(q string, args ...any) {
		tb.Helper()
		if _, err := conn.Exec(ctx, q, args...); err != nil {
			tb.Fatalf("%.60s: %v", q, err)
		}
	}
	exec(`SET maintenance_work_mem = '512MB'`)
	t0 := time.Now()
	var rebuild []string
	if have == 0 && n >= 200_000 {
		rows, err := conn.Query(ctx, `SELECT indexname, indexdef FROM pg_indexes i
			WHERE schemaname = current_schema() AND tablename IN ('messages', 'payload_versions')
			AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname)`)
		if err != nil {
			tb.Fatal(err)
		}
		var names []string
		for rows.Next() {
			var name, def string
			if err := rows.Scan(&name, &def); err != nil {
				tb.Fatal(err)
			}
			names, rebuild = append(names, name), append(rebuild, def)
		}
		if err := rows.Err(); err != nil {
			tb.Fatal(err)
		}
		for _, name := range names {
			exec(`DROP INDEX ` + pgx.Identifier{name}.Sanitize())
		}
	}
	const chunk = 100_000
	for lo := have; lo < int64(n); lo += chunk {
		hi := min(lo+chunk, int64(n)) - 1
		exec(SeedSQL, lo, hi, seedPayloadSize(n))
		if n > chunk {
			tb.Logf("seeded %d of %d messages in %v", hi+1, n, time.Since(t0).Round(time.Second))
		}
	}
	for _, def := range rebuild {
		exec(def)
	}
	if len(rebuild) > 0 {
		tb.Logf("built %d indexes in %v", len(rebuild), time.Since(t0).Round(time.Second))
	}
	exec(`SELECT quarantine_recount()`)
	tb.Logf("seeded and counted %d messages in %v", n-int(have), time.Since(t0).Round(time.Second))
	vacuum(tb, pool)
}

// vacuum analyzes the tables and waits until VACUUM has marked (nearly)
// every page of messages all-visible, as autovacuum keeps a live table:
// the planner prices index-only scans (counting) by that share. A
// transaction open anywhere in the database (another test) holds the
// marking back, so VACUUM is repeated until it is done, for up to a minute.
func vacuum(tb testing.TB, pool *pgxpool.Pool) {
	tb.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(time.Minute)
	for {
		for _, q := range []string{"VACUUM ANALYZE messages", "VACUUM ANALYZE payload_versions"} {
			if _, err := pool.Exec(ctx, q); err != nil {
				tb.Fatalf("%s: %v", q, err)
			}
		}
		var visible float64
		err := pool.QueryRow(ctx, `SELECT relallvisible::float8 / greatest(relpages, 1)
			FROM pg_class WHERE oid = 'messages'::regclass`).Scan(&visible)
		if err != nil {
			tb.Fatal(err)
		}
		if visible >= 0.95 {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("after a minute of VACUUM only %.0f%% of messages is all-visible: a long transaction holds it back", visible*100)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Package pgseed seeds a PostgreSQL store's schema with a large,
// deterministic set of messages for benchmarks, without going through
// InsertBatch. It is the data set of store/postgres's benchmarks
// (store/postgres/seed_test.go calls it), shared so that other packages' benchmarks
// (web's BenchmarkPages) measure against the same data.
package pgseed

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// SeedSQL inserts the seeded messages $1 .. $2 (payloads of $3 bytes,
// failed_at in the $5 µs before $4)
// and their payload versions in one statement run by the server
// (generate_series): no row crosses the network. The search index's
// trigger queues them for the store's indexer.
const SeedSQL = seedMessages + `
SELECT count(*) FROM pv`

// seedDocsSQL is SeedSQL that also writes the messages' search
// documents, as the indexer would (store/internal/search.Doc folds case;
// the seed is ASCII, whose folding is lower()); the store's benchmarks
// check a few against search.Doc.
const seedDocsSQL = seedMessages + `
INSERT INTO search_docs (message_id, failed_at, doc)
SELECT ins.id, ins.failed_at, lower(ins.reason) || chr(31) || lower(ins.job_name) || chr(31) || lower(pv.payload_text)
FROM ins JOIN pv ON pv.message_id = ins.id`

const seedMessages = `
WITH g AS (
	SELECT i,
		'0' || lpad(upper(to_hex(i)), 25, '0') AS id,
		$4::timestamptz - ((i::bigint * 2654435761) % $5::bigint) * interval '1 microsecond' AS failed_at
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
	RETURNING id, payload_sha256, collected_at, source, idempotency_key, failed_at, reason, job_name
), pv AS (
	INSERT INTO payload_versions (message_id, version, sha256, prev_sha256, size, content_type, actor,
		reason, created_at, payload, payload_text)
	SELECT id, 1, payload_sha256, '', $3::int, 'application/json', 'collector:' || source, '', collected_at, NULL,
		rpad('{"order_id":"' || idempotency_key || '","customer":"c-' || (hashtext(id) % 9973) || '","items":"' ||
			repeat(md5(id) || ' sku-' || (hashtext(id) % 1000) || ' ', 20), $3::int - 2) || '"}'
	FROM ins
	RETURNING message_id, payload_text
)
`

// seedPayloadSize is the payload size of a seed of n messages: 1 KiB up
// to a million, 200 bytes beyond (ten million 1 KiB payloads would be 10
// GB of payload versions, and as much again in search documents).
func seedPayloadSize(n int) int {
	if n > 1_000_000 {
		return 200
	}
	return 1024
}

// EnvLock names the environment variable holding the path of a lock file
// (flock(2)) that Seed holds for each step of a long seed: a million
// messages, one index build. Set it to the benchmarks' lock
// (/tmp/quarantine-bench.lock) to seed ten million messages while other
// benchmarks run between the steps; do not set it under a command that
// already holds that lock (flock(1)): Seed would wait for itself.
const EnvLock = "QUARANTINE_BENCH_LOCK"

const (
	// chunk is how many messages one statement (and transaction) seeds.
	chunk = 100_000
	// lockedChunks is how many chunks Seed seeds per hold of the lock.
	lockedChunks = 10
	// bulkSeed is the size from which a seed into an empty schema drops
	// the indexes and writes the search documents itself.
	bulkSeed = 200_000
	// lockedBuilds is how long Seed goes on building indexes in one hold
	// of the lock.
	lockedBuilds = time.Minute
)

// window is where the seeded failed_at fall: the span before newest.
type window struct {
	newest     time.Time
	spanMicros int64
}

// stateSQL creates the seed's progress table: how many messages are
// seeded (rows 0 .. seeded-1) and the definitions of the indexes dropped
// for the seed, to build again when it is complete. Each chunk updates it
// in its own transaction, so a seed that stopped resumes where it was.
const stateSQL = `CREATE TABLE IF NOT EXISTS pgseed_state (
	seeded  bigint NOT NULL,
	rebuild text[] NOT NULL
)`

// Seed makes sure the schema of pool holds at least n seeded messages
// (rows seed-0 .. seed-(n-1)) with their search documents, inserting the
// missing ones in chunks, then counts them (quarantine_recount: the seed
// bypasses InsertBatch) and analyzes. A large seed into an empty schema
// drops the secondary indexes first and builds them again at the end,
// which is several times faster than keeping them up to date row by row;
// each chunk is vacuumed after it is written, so the seeded tables are
// all-visible as autovacuum keeps a live table. It reports progress
// through tb.Log for long seeds, and holds the lock of EnvLock, when set,
// for each million messages and each index build.
func Seed(tb testing.TB, pool *pgxpool.Pool, n int) {
	tb.Helper()
	SeedWindow(tb, pool, n, time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC), 30*24*time.Hour)
}

// SeedWindow is Seed with the seeded failed_at spread over the span
// before newest instead of the 30 days before 2025-06-01 (each message
// is collected a minute after it failed): BenchmarkBurst's million
// dead letters collected within one hour.
func SeedWindow(tb testing.TB, pool *pgxpool.Pool, n int, newest time.Time, span time.Duration) {
	tb.Helper()
	w := window{newest.UTC(), span.Microseconds()}
	ctx := context.Background()
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
	// A bulk seed (the benchmarks' large data sets) writes the search
	// documents itself; a small one (tests) leaves them to the indexer.
	bulk := n >= bulkSeed
	exec(stateSQL)
	have, rebuild := state(tb, conn, bulk)
	if have >= int64(n) && len(rebuild) == 0 {
		vacuum(tb, pool)
		return
	}
	exec(`SET maintenance_work_mem = '512MB'`)
	exec(`SET work_mem = '256MB'`)
	exec(`SET jit = off`)
	t0 := time.Now()
	if have == 0 && bulk && len(rebuild) == 0 {
		unlock := lock(tb)
		rows, err := conn.Query(ctx, `SELECT indexname, indexdef FROM pg_indexes i
			WHERE schemaname = current_schema() AND tablename IN ('messages', 'payload_versions', 'search_docs')
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
		tx, err := conn.Begin(ctx)
		if err != nil {
			tb.Fatal(err)
		}
		for _, name := range names {
			if _, err := tx.Exec(ctx, `DROP INDEX `+pgx.Identifier{name}.Sanitize()); err != nil {
				tb.Fatal(err)
			}
		}
		if _, err := tx.Exec(ctx, `DELETE FROM pgseed_state`); err != nil {
			tb.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO pgseed_state VALUES (0, $1)`, rebuild); err != nil {
			tb.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			tb.Fatal(err)
		}
		unlock()
	}
	for lo := have; lo < int64(n); {
		unlock := lock(tb)
		for range lockedChunks {
			if lo >= int64(n) {
				break
			}
			hi := min(lo+chunk, int64(n)) - 1
			seedChunk(tb, conn, lo, hi, seedPayloadSize(n), bulk, w)
			lo = hi + 1
		}
		// Hint bits and the visibility map of the new pages now, as
		// autovacuum would have set them on a live table; with the
		// indexes dropped it reads only the new pages.
		exec(`VACUUM messages, payload_versions, search_docs`)
		unlock()
		if n > chunk {
			tb.Logf("seeded %d of %d messages in %v", lo, n, time.Since(t0).Round(time.Second))
		}
	}
	// The indexes, as many per hold of the lock as are built within
	// lockedBuilds (a B-tree of ten million rows takes about 20 s).
	counted := false
	for len(rebuild) > 0 {
		unlock := lock(tb)
		t1 := time.Now()
		for len(rebuild) > 0 && time.Since(t1) < lockedBuilds {
			t2 := time.Now()
			// IF NOT EXISTS: a seed stopped during a build may have
			// committed the index without recording it.
			exec(strings.Replace(rebuild[0], "CREATE INDEX ", "CREATE INDEX IF NOT EXISTS ", 1))
			exec(`UPDATE pgseed_state SET rebuild = rebuild[2:]`)
			tb.Logf("built %.70s in %v", rebuild[0], time.Since(t2).Round(time.Second))
			rebuild = rebuild[1:]
		}
		if len(rebuild) == 0 {
			exec(`SELECT quarantine_recount()`)
			counted = true
		}
		unlock()
	}
	if !counted {
		unlock := lock(tb)
		exec(`SELECT quarantine_recount()`)
		unlock()
	}
	tb.Logf("seeded and counted %d messages in %v", int64(n)-have, time.Since(t0).Round(time.Second))
	vacuum(tb, pool)
}

// state reads the seed's progress: the count of seeded messages and the
// indexes still to build. A schema without a row (seeded before the
// progress table, or not at all) has its seeded messages counted, and for
// a bulk seed the missing search documents written.
func state(tb testing.TB, conn *pgxpool.Conn, bulk bool) (int64, []string) {
	tb.Helper()
	ctx := context.Background()
	var (
		have    int64
		rebuild []string
	)
	err := conn.QueryRow(ctx, `SELECT seeded, rebuild FROM pgseed_state`).Scan(&have, &rebuild)
	if err == nil {
		return have, rebuild
	}
	if err != pgx.ErrNoRows {
		tb.Fatal(err)
	}
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM messages WHERE source LIKE 'seed-%'`).Scan(&have); err != nil {
		tb.Fatal(err)
	}
	if bulk {
		writeDocs(tb, conn)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO pgseed_state VALUES ($1, '{}')`, have); err != nil {
		tb.Fatal(err)
	}
	return have, nil
}

// writeDocs writes the missing search documents of a schema seeded
// before the seed wrote them, as the indexer would; the search_pending
// rows the trigger queued go with them.
func writeDocs(tb testing.TB, conn *pgxpool.Conn) {
	tb.Helper()
	ctx := context.Background()
	var missing int64
	err := conn.QueryRow(ctx, `SELECT count(*) FROM messages m
		WHERE NOT EXISTS (SELECT 1 FROM search_docs d WHERE d.message_id = m.id)`).Scan(&missing)
	if err != nil {
		tb.Fatal(err)
	}
	if missing == 0 {
		return
	}
	t0 := time.Now()
	for _, q := range []string{`DELETE FROM search_pending`, `INSERT INTO search_docs (message_id, failed_at, doc)
		SELECT m.id, m.failed_at, lower(m.reason) || chr(31) || lower(m.job_name) || chr(31) || lower(coalesce(pv.payload_text, ''))
		FROM messages m
		LEFT JOIN payload_versions pv ON pv.message_id = m.id AND pv.version = m.payload_version
		WHERE NOT EXISTS (SELECT 1 FROM search_docs d WHERE d.message_id = m.id)
		ON CONFLICT (message_id) DO NOTHING`} {
		if _, err := conn.Exec(ctx, q); err != nil {
			tb.Fatalf("%.60s: %v", q, err)
		}
	}
	tb.Logf("wrote the search documents of %d messages in %v", missing, time.Since(t0).Round(time.Second))
}

// seedChunk seeds messages lo .. hi in one transaction and records the
// progress. A bulk chunk writes the messages' search documents itself,
// with the trigger that queues new messages for the indexer disabled.
func seedChunk(tb testing.TB, conn *pgxpool.Conn, lo, hi int64, size int, bulk bool, w window) {
	tb.Helper()
	ctx := context.Background()
	tx, err := conn.Begin(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	type stmt struct {
		q    string
		args []any
	}
	steps := []stmt{{SeedSQL, []any{lo, hi, size, w.newest, w.spanMicros}}}
	if bulk {
		steps = []stmt{
			{`ALTER TABLE messages DISABLE TRIGGER search_queue_inserted`, nil},
			{seedDocsSQL, []any{lo, hi, size, w.newest, w.spanMicros}},
			{`ALTER TABLE messages ENABLE TRIGGER search_queue_inserted`, nil},
		}
	}
	steps = append(steps, stmt{`UPDATE pgseed_state SET seeded = $1`, []any{hi + 1}})
	for _, s := range steps {
		if _, err := tx.Exec(ctx, s.q, s.args...); err != nil {
			tb.Fatalf("seed %d..%d: %.60s: %v", lo, hi, s.q, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		tb.Fatal(err)
	}
}

// lock takes the lock file named by EnvLock, when set, and returns its
// release.
func lock(tb testing.TB) func() {
	tb.Helper()
	path := os.Getenv(EnvLock)
	if path == "" {
		return func() {}
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		tb.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		tb.Fatal(fmt.Errorf("lock %s: %w", path, err))
	}
	return func() { f.Close() } // closing the file releases the lock
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
		for _, q := range []string{"VACUUM ANALYZE messages", "VACUUM ANALYZE payload_versions", "VACUUM ANALYZE search_docs"} {
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

// Package benchseed seeds a fresh database with a burst of dead letters
// for the benchmarks that run the built binary on a million messages
// (cmd/quarantine's pin and discard, broker/rabbitmq's replay).
package benchseed

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
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
	defer func() { // the store open last
		if st != nil {
			st.Close()
		}
	}()
	if err := st.Migrate(ctx); err != nil {
		tb.Fatal(err)
	}
	var cached, template string
	if pg, ok := st.(*postgres.Store); ok {
		pgseed.SeedWindow(tb, pg.Pool(), rows, storetest.BurstNewest, storetest.BurstSpan)
	} else {
		template = sqliteTemplate(tb, sqlitePath(url), rows)
		if template != "" {
			if _, err := os.Stat(template); err == nil {
				cached = template
			}
		}
		if cached == "" {
			storetest.SeedBurst(tb, st, rows, "burst")
		}
	}
	if cached != "" {
		// The seeded file replaces the empty, migrated one: the schema is
		// the same (the template's name is its hash).
		if err := st.Close(); err != nil {
			tb.Fatal(err)
		}
		copyFile(tb, cached, sqlitePath(url))
		tb.Logf("seed: %s (cached; QUARANTINE_BENCH_SEED_CACHE=off seeds anew)", cached)
		if st, err = storeopen.Store(ctx, url); err != nil {
			tb.Fatal(err)
		}
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
	if template != "" && cached == "" {
		// Closed first, so that the file holds every page (the last
		// connection's close checkpoints the log).
		if err := st.Close(); err != nil {
			tb.Fatal(err)
		}
		copyFile(tb, sqlitePath(url), template)
		if st, err = storeopen.Store(ctx, url); err != nil {
			tb.Fatal(err)
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

// sqliteTemplate returns the path of the cached seed of rows messages for
// st's schema, under QUARANTINE_BENCH_SEED_CACHE (default a folder in the
// temporary directory), or "" when that is "off". Seeding a million
// messages through InsertBatch takes minutes; a copy of the file seconds.
// The name holds a hash of the schema (every table, index and trigger), so
// a migration seeds anew.
func sqliteTemplate(tb testing.TB, path string, rows int) string {
	dir := os.Getenv("QUARANTINE_BENCH_SEED_CACHE")
	if dir == "off" {
		return ""
	}
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "quarantine-benchseed")
	}
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	var schema string
	err = db.QueryRowContext(tb.Context(),
		`SELECT group_concat(coalesce(sql, ''), ';') FROM (SELECT sql FROM sqlite_master ORDER BY type, name)`).Scan(&schema)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	sum := sha256.Sum256([]byte(schema))
	return filepath.Join(dir, fmt.Sprintf("sqlite-%d-%x.db", rows, sum[:8]))
}

func sqlitePath(url string) string { return strings.TrimPrefix(url, "sqlite:") }

// copyFile copies src to dst through a temporary file renamed into place,
// so that a stopped run never leaves a partial template.
func copyFile(tb testing.TB, src, dst string) {
	tb.Helper()
	in, err := os.Open(src)
	if err != nil {
		tb.Fatal(err)
	}
	defer in.Close()
	out, err := os.CreateTemp(filepath.Dir(dst), filepath.Base(dst)+".*")
	if err != nil {
		tb.Fatal(err)
	}
	defer os.Remove(out.Name())
	if _, err := io.Copy(out, in); err != nil {
		tb.Fatal(err)
	}
	if err := out.Close(); err != nil {
		tb.Fatal(err)
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		os.Remove(dst + suffix)
	}
	if err := os.Rename(out.Name(), dst); err != nil {
		tb.Fatal(err)
	}
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

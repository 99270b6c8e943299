package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/sampling"
	"github.com/quarantine-dev/quarantine/store/internal/shared"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver
)

// Store is a quarantine store in one SQLite file.
type Store struct {
	// The methods both stores share apart from SQL (store/internal/shared),
	// over backend.
	sharedMethods

	path string
	w    *sql.DB // the one writer connection
	r    *sql.DB // read-only connections
	now  func() time.Time
	// sample are the thresholds of Sample (sample.go); tests lower them.
	sample sampling.Limits
	// pendingPrefix is sampleReader.prefix (0: the default); tests lower it.
	pendingPrefix int
	idx           *indexer      // the background search indexer (search.go)
	ckpt          *checkpointer // the background WAL checkpoint (checkpoint.go)
	stmts         readStmts
}

// sharedMethods names the shared methods embedded in Store.
type sharedMethods = shared.Methods

// Option configures a Store.
type Option func(*Store)

// WithClock sets the clock the store stamps rows with (default time.Now).
func WithClock(now func() time.Time) Option {
	return func(s *Store) { s.now = now }
}

// writePragmas are set on the write connection; WAL and synchronous NORMAL
// keep commits durable against a process crash and fast. The writer's
// page cache holds writerCacheKiB of pages (SQLite's default is 2 MB): a
// collector's batch of 500 messages of 1 KiB dirties more pages than 2 MB
// hold, and SQLite then spilled pages to the WAL in the middle of the
// transaction and read them back with read calls (docs/benchmarks.md,
// Memory and SQLite tuning).
const writePragmas = "_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)" +
	"&_pragma=foreign_keys(1)&_pragma=cache_size(-" + writerCacheKiB + ")&_txlock=immediate" +
	"&_pragma=wal_autocheckpoint(" + backstop + ")"

// writerCacheKiB is the writer's page cache, in KiB of pages (64 MiB).
// Each cached page costs the process about twice its size: the pure-Go
// SQLite allocates memory in power-of-two slots, and a page of 4 KiB with
// its header takes a slot of 8 KiB; a replay or a discard of a million
// messages fills it. Half of it (tried for serve's memory while replaying
// a million) left a discard of a million re-reading its index pages with
// read calls, several times slower (docs/replays-at-scale.md, Serve's
// memory); the Go memory limit (cmd/quarantine/gc.go) keeps serve under
// its bound instead.
const writerCacheKiB = "65536"

// readPragmas are set on the read connections. They read the database
// file through a memory map (up to 1 GiB; the rest, and the WAL, through
// read calls): the rows of a sample lie on random pages, and reading each
// with a system call into the 2 MB page cache took a large share of a
// sample's time (docs/benchmarks.md).
const readPragmas = "_pragma=busy_timeout(5000)&_pragma=foreign_keys(1)&_pragma=query_only(1)&_pragma=mmap_size(1073741824)"

// Open opens (creating it and its parent directories when missing) the
// database file at path. It does not migrate: call Migrate. Errors are
// EUNAVAILABLE when the file cannot be created or opened.
func Open(ctx context.Context, path string, opts ...Option) (*Store, error) {
	if path == "" || path == ":memory:" {
		return nil, quarantine.Errorf(quarantine.EINVALID, "the SQLite store needs a file path")
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, &quarantine.Error{Code: quarantine.EUNAVAILABLE, Message: "cannot create the database directory", Err: err}
		}
	}
	s := &Store{path: path, now: time.Now, sample: sampling.Limits{Exact: sampling.Exact, SmallGroup: sampling.SmallGroup}}
	s.sharedMethods = shared.New(backend{s}, s.clock)
	for _, o := range opts {
		o(s)
	}
	u := (&url.URL{Scheme: "file", OmitHost: true, Path: path}).String()
	w, err := sql.Open("sqlite", u+"?"+writePragmas)
	if err != nil {
		return nil, translate(err, "open the database")
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	// The writer connects first: it creates the file and turns on WAL
	// before any reader opens it.
	if err := w.PingContext(ctx); err != nil {
		w.Close()
		return nil, translate(err, "open the database")
	}
	r, err := sql.Open("sqlite", u+"?"+readPragmas)
	if err != nil {
		w.Close()
		return nil, translate(err, "open the database")
	}
	n := max(4, runtime.GOMAXPROCS(0))
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	s.w, s.r = w, r
	s.ckpt = startCheckpointer(u + "?_pragma=busy_timeout(5000)")
	s.startIndexer()
	return s, nil
}

// Path returns the database file's path.
func (s *Store) Path() string { return s.path }

// Close releases the connections.
func (s *Store) Close() error {
	s.stopIndexer()
	s.stmts.close()
	return errors.Join(s.ckpt.close(), s.r.Close(), s.w.Close())
}

// Ping checks that both the writer and a reader answer.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.w.PingContext(ctx); err != nil {
		return translate(err, "ping the database")
	}
	var one int
	if err := s.r.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		return translate(err, "ping the database")
	}
	return nil
}

// clock returns the store's time, UTC, truncated to microseconds.
func (s *Store) clock() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

// write runs fn in an IMMEDIATE transaction on the writer, retrying when
// another process holds the write lock past the busy timeout.
func (s *Store) write(ctx context.Context, what string, fn func(tx *sql.Tx) error) error {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		err = s.writeOnce(ctx, fn)
		if !isBusy(err) {
			break
		}
		select {
		case <-ctx.Done():
			return translate(ctx.Err(), what)
		case <-time.After(time.Duration(50<<attempt) * time.Millisecond):
		}
	}
	return translate(err, what)
}

func (s *Store) writeOnce(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	s.ckpt.wrote()
	return nil
}

// read runs fn in a read transaction: one consistent snapshot.
func (s *Store) read(ctx context.Context, what string, fn func(tx *sql.Tx) error) error {
	return readTx(ctx, s.r, what, fn)
}

// readTx runs fn in a read-only transaction begun on db (the readers'
// pool, or one connection of it).
func readTx(ctx context.Context, db interface {
	BeginTx(context.Context, *sql.TxOptions) (*sql.Tx, error)
}, what string, fn func(tx *sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return translate(err, what)
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return translate(err, what)
	}
	return nil
}

// readUnmapped runs fn in a read transaction on a read connection whose
// memory map is turned off while it runs, for the reads that walk much of
// the messages table (a pin's snapshot, the count that starts a discard):
// every page of it mapped would stay resident in the process (a gigabyte
// at a million messages), whereas read into the connection's page cache
// the pages are the kernel's cache, not the server's memory.
func (s *Store) readUnmapped(ctx context.Context, what string, fn func(tx *sql.Tx) error) error {
	conn, err := s.r.Conn(ctx)
	if err != nil {
		return translate(err, what)
	}
	defer conn.Close()
	var mmap int64
	if err := conn.QueryRowContext(ctx, "PRAGMA mmap_size").Scan(&mmap); err != nil {
		return translate(err, what)
	}
	if _, err := conn.ExecContext(ctx, "PRAGMA mmap_size = 0"); err != nil {
		return translate(err, what)
	}
	defer func() {
		if _, err := conn.ExecContext(context.WithoutCancel(ctx), "PRAGMA mmap_size = "+strconv.FormatInt(mmap, 10)); err != nil {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn }) // not back to the pool as it is
		}
	}()
	return readTx(ctx, conn, what, fn)
}

// micros and fromMicros convert times to and from the stored form.
func micros(t time.Time) int64 { return t.UTC().Truncate(time.Microsecond).UnixMicro() }

func fromMicros(v int64) time.Time { return time.UnixMicro(v).UTC() }

func microsPtr(t *time.Time) any {
	if t == nil {
		return nil
	}
	return micros(*t)
}

func fromMicrosPtr(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromMicros(v.Int64)
	return &t
}

// jsonArray encodes ids for json_each: one parameter for any number of ids.
func jsonArray(ids []string) string {
	b, _ := json.Marshal(ids) // strings always marshal
	return string(b)
}

package postgres

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/sampling"
	"github.com/quarantine-dev/quarantine/store/internal/shared"
)

// Store is a quarantine store in a PostgreSQL database, satisfying
// store.Store (the assertion lives in package store/open, the one that
// imports both stores). It is safe for concurrent use.
type Store struct {
	// The methods both stores share apart from SQL (store/internal/shared),
	// over backend.
	sharedMethods

	pool *pgxpool.Pool
	now  func() time.Time
	// sample are the thresholds of Sample (sample.go); tests lower them.
	sample sampling.Limits
	idx    *indexer // the background search indexer (search.go)
}

// sharedMethods names the shared methods embedded in Store.
type sharedMethods = shared.Methods

// Option configures a Store in Open.
type Option func(*Store)

// WithClock makes the store read the time from now instead of time.Now:
// collection times, audit times and token times all come from it.
func WithClock(now func() time.Time) Option {
	return func(s *Store) { s.now = now }
}

// IdleInTransactionTimeout is the server's idle_in_transaction_session_timeout
// for the store's connections unless the URL sets it: a session that sits
// inside a transaction for longer, without a statement running, is ended
// by the server and its locks are released. The store's transactions never
// wait on anything but the database, so only a process that stopped
// (SIGSTOP, a debugger, a VM paused, a network partition) reaches it; without
// it, such a process holding the audit chain's head or a destination's rate
// bucket would stall every other instance until its TCP connection died.
const IdleInTransactionTimeout = "10s"

// Open connects to the database at url (a postgres:// URL or a key=value
// DSN; runtime parameters such as search_path are passed to the server,
// and IdleInTransactionTimeout applies unless url sets
// idle_in_transaction_session_timeout) and checks that it answers. It does not migrate: call Migrate.
//
// Errors: EINVALID for a URL that does not parse, EUNAVAILABLE when the
// database cannot be reached.
func Open(ctx context.Context, url string, opts ...Option) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, &quarantine.Error{Code: quarantine.EINVALID, Message: "the PostgreSQL URL does not parse", Err: err}
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		cfg.ConnConfig.RuntimeParams["application_name"] = "quarantine"
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"]; !ok {
		cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = IdleInTransactionTimeout
	}
	if !strings.Contains(url, "pool_max_conns") {
		// pgxpool's default (the larger of 4 and the CPUs), plus the
		// background indexer's workers: their passes do not take the
		// connections the collectors and the API need.
		cfg.MaxConns += indexWorkers
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, translate(err, "connect to PostgreSQL")
	}
	s := &Store{pool: pool, now: time.Now, sample: sampling.Limits{Exact: sampling.Exact, SmallGroup: sampling.SmallGroup}}
	s.sharedMethods = shared.New(backend{s}, s.clock)
	for _, o := range opts {
		o(s)
	}
	if err := s.Ping(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	s.startIndexer()
	return s, nil
}

// Pool returns the connection pool, for tests and tools that need raw SQL.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Ping checks that the database answers. Errors: EUNAVAILABLE.
func (s *Store) Ping(ctx context.Context) error {
	return translate(s.pool.Ping(ctx), "ping PostgreSQL")
}

// Close releases the connections. It waits for acquired connections to be
// released and always returns nil.
func (s *Store) Close() error {
	s.stopIndexer()
	s.pool.Close()
	return nil
}

// clock returns the store's current time, in UTC, truncated to the
// microsecond that PostgreSQL keeps.
func (s *Store) clock() time.Time {
	return s.now().UTC().Truncate(time.Microsecond)
}

// inTx runs fn in a read-committed transaction and commits it when fn
// returns nil. Errors are translated.
func (s *Store) inTx(ctx context.Context, what string, fn func(tx pgx.Tx) error) error {
	return s.inTxOpts(ctx, pgx.TxOptions{}, what, fn)
}

// snapshot runs fn in a read-only repeatable-read transaction: every
// statement of fn reads one consistent snapshot. Errors are translated.
func (s *Store) snapshot(ctx context.Context, what string, fn func(tx pgx.Tx) error) error {
	return s.inTxOpts(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, what, fn)
}

func (s *Store) inTxOpts(ctx context.Context, opts pgx.TxOptions, what string, fn func(tx pgx.Tx) error) error {
	tx, err := s.pool.BeginTx(ctx, opts)
	if err != nil {
		return translate(err, what)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := fn(tx); err != nil {
		return translate(err, what)
	}
	return translate(tx.Commit(ctx), what)
}

// Package sqliteclaims stores worker claims (worker.Claims) in SQLite
// (modernc.org/sqlite, pure Go): one table, worker_claims, created by
// Migrate (Open calls it). Times are Unix nanoseconds from the injected
// clock. worker.ProofQuery runs against it as is.
package sqliteclaims

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver

	"github.com/quarantine-dev/quarantine/worker"
	"github.com/quarantine-dev/quarantine/worker/internal/sqlclaims"
)

// Schema creates the claims table (idempotent).
const Schema = `CREATE TABLE IF NOT EXISTS worker_claims (
	key         TEXT PRIMARY KEY,
	state       TEXT NOT NULL CHECK (state IN ('held', 'done', 'released')),
	owner       TEXT NOT NULL,
	lease_until INTEGER NOT NULL, -- Unix ns; 0 when done
	completions INTEGER NOT NULL DEFAULT 0,
	claimed_at  INTEGER NOT NULL,
	updated_at  INTEGER NOT NULL
) STRICT`

const pragmas = "_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate"

// Claims is worker.Claims on SQLite. Safe for concurrent use.
type Claims struct {
	*sqlclaims.Claims // the rules, over db's statements
	db                *sql.DB
	own               bool // Close closes db
}

var (
	_ worker.Claims = (*Claims)(nil)
	_ worker.Prover = (*Claims)(nil)
)

// Open opens (creating) the SQLite database file at path, applies the
// schema and returns claims reading the clock now (time.Now when nil). It
// returns the driver's error when the file cannot be opened or migrated.
func Open(ctx context.Context, path string, now func() time.Time) (*Claims, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?"+pragmas)
	if err != nil {
		return nil, fmt.Errorf("sqliteclaims: open %s: %w", path, err)
	}
	db.SetMaxOpenConns(1) // SQLite has one writer; queue in Go, not in busy loops
	if err := Migrate(ctx, db); err != nil {
		db.Close()
		return nil, err
	}
	c := New(db, now)
	c.own = true
	return c, nil
}

// Migrate creates the worker_claims table in db when it is missing.
func Migrate(ctx context.Context, db *sql.DB) error {
	if _, err := db.ExecContext(ctx, Schema); err != nil {
		return fmt.Errorf("sqliteclaims: migrate: %w", err)
	}
	return nil
}

// New returns claims on db, which must hold the schema (Migrate).
func New(db *sql.DB, now func() time.Time) *Claims {
	return &Claims{Claims: sqlclaims.New("sqliteclaims", stmts{db}, now), db: db}
}

// DB returns the database handle (tests run worker.ProofQuery on it).
func (c *Claims) DB() *sql.DB { return c.db }

// Close closes the database when Open opened it.
func (c *Claims) Close() error {
	if c.own {
		return c.db.Close()
	}
	return nil
}

// stmts are the claims' statements (sqlclaims.DB); times are Unix
// nanoseconds.
type stmts struct{ db *sql.DB }

func (d stmts) Take(ctx context.Context, key, owner string, until, now time.Time) (bool, error) {
	var got string
	err := d.db.QueryRowContext(ctx, `INSERT INTO worker_claims (key, state, owner, lease_until, completions, claimed_at, updated_at)
		VALUES (?1, 'held', ?2, ?3, 0, ?4, ?4)
		ON CONFLICT (key) DO UPDATE SET state = 'held', owner = excluded.owner, lease_until = excluded.lease_until,
			claimed_at = excluded.claimed_at, updated_at = excluded.updated_at
		WHERE worker_claims.state = 'released' OR (worker_claims.state = 'held' AND worker_claims.lease_until <= ?4)
		RETURNING owner`, key, owner, until.UnixNano(), now.UnixNano()).Scan(&got)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

func (d stmts) Holder(ctx context.Context, key string) (state, owner string, leaseUntil time.Time, err error) {
	var leaseNS int64
	err = d.db.QueryRowContext(ctx, `SELECT state, owner, lease_until FROM worker_claims WHERE key = ?`, key).Scan(&state, &owner, &leaseNS)
	return state, owner, time.Unix(0, leaseNS), err
}

func (d stmts) exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := d.db.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (d stmts) Extend(ctx context.Context, key, owner string, until, now time.Time) (int64, error) {
	return d.exec(ctx, `UPDATE worker_claims SET lease_until = ?3, updated_at = ?4
		WHERE key = ?1 AND owner = ?2 AND state = 'held'`, key, owner, until.UnixNano(), now.UnixNano())
}

func (d stmts) Complete(ctx context.Context, key, owner string, now time.Time) (int64, error) {
	return d.exec(ctx, `UPDATE worker_claims SET state = 'done', lease_until = 0,
		completions = completions + 1, updated_at = ?3
		WHERE key = ?1 AND owner = ?2 AND state = 'held'`, key, owner, now.UnixNano())
}

func (d stmts) Release(ctx context.Context, key, owner string, now time.Time) (int64, error) {
	return d.exec(ctx, `UPDATE worker_claims SET state = 'released', lease_until = ?3, updated_at = ?3
		WHERE key = ?1 AND owner = ?2 AND state = 'held'`, key, owner, now.UnixNano())
}

func (d stmts) Proof(ctx context.Context) (sqlclaims.Rows, error) {
	rows, err := d.db.QueryContext(ctx, worker.ProofQuery)
	if err != nil {
		return nil, err
	}
	return sqlRows{rows}, nil
}

// sqlRows are database/sql's rows as sqlclaims.Rows.
type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { _ = r.Rows.Close() }

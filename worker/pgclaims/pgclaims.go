// Package pgclaims stores worker claims (worker.Claims) in PostgreSQL
// through pgx: one table, worker_claims, created by Migrate (Open calls
// it) in the connection's search_path. Lease times come from the injected
// clock, not the server's, so that tests can move them. worker.ProofQuery
// runs against it as is.
package pgclaims

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/quarantine-dev/quarantine/worker"
	"github.com/quarantine-dev/quarantine/worker/internal/sqlclaims"
)

// Schema creates the claims table (idempotent).
const Schema = `CREATE TABLE IF NOT EXISTS worker_claims (
	key         text PRIMARY KEY,
	state       text NOT NULL CHECK (state IN ('held', 'done', 'released')),
	owner       text NOT NULL,
	lease_until timestamptz,          -- NULL when done
	completions integer NOT NULL DEFAULT 0,
	claimed_at  timestamptz NOT NULL,
	updated_at  timestamptz NOT NULL
)`

// Claims is worker.Claims on PostgreSQL. Safe for concurrent use.
type Claims struct {
	*sqlclaims.Claims // the rules, over db's statements
	pool              *pgxpool.Pool
	own               bool
}

var (
	_ worker.Claims = (*Claims)(nil)
	_ worker.Prover = (*Claims)(nil)
)

// Open connects to url (postgres://…), applies the schema and returns
// claims reading the clock now (time.Now when nil). It returns pgx's
// error when the database does not answer or the schema fails.
func Open(ctx context.Context, url string, now func() time.Time) (*Claims, error) {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("pgclaims: %w", err)
	}
	if err := Migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	c := New(pool, now)
	c.own = true
	return c, nil
}

// Migrate creates the worker_claims table when it is missing.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	if _, err := pool.Exec(ctx, Schema); err != nil {
		return fmt.Errorf("pgclaims: migrate: %w", err)
	}
	return nil
}

// New returns claims on pool, which must hold the schema (Migrate).
func New(pool *pgxpool.Pool, now func() time.Time) *Claims {
	return &Claims{Claims: sqlclaims.New("pgclaims", stmts{pool}, now), pool: pool}
}

// Pool returns the connection pool.
func (c *Claims) Pool() *pgxpool.Pool { return c.pool }

// Close closes the pool when Open opened it.
func (c *Claims) Close() {
	if c.own {
		c.pool.Close()
	}
}

// stmts are the claims' statements (sqlclaims.DB).
type stmts struct{ pool *pgxpool.Pool }

func (d stmts) Take(ctx context.Context, key, owner string, until, now time.Time) (bool, error) {
	var got string
	err := d.pool.QueryRow(ctx, `INSERT INTO worker_claims AS w (key, state, owner, lease_until, completions, claimed_at, updated_at)
		VALUES ($1, 'held', $2, $3, 0, $4, $4)
		ON CONFLICT (key) DO UPDATE SET state = 'held', owner = excluded.owner, lease_until = excluded.lease_until,
			claimed_at = excluded.claimed_at, updated_at = excluded.updated_at
		WHERE w.state = 'released' OR (w.state = 'held' AND w.lease_until <= $4)
		RETURNING owner`, key, owner, until, now).Scan(&got)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

func (d stmts) Holder(ctx context.Context, key string) (state, owner string, leaseUntil time.Time, err error) {
	var lease *time.Time
	err = d.pool.QueryRow(ctx, `SELECT state, owner, lease_until FROM worker_claims WHERE key = $1`, key).Scan(&state, &owner, &lease)
	if lease != nil {
		leaseUntil = *lease
	}
	return state, owner, leaseUntil, err
}

func (d stmts) exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := d.pool.Exec(ctx, query, args...)
	return tag.RowsAffected(), err
}

func (d stmts) Extend(ctx context.Context, key, owner string, until, now time.Time) (int64, error) {
	return d.exec(ctx, `UPDATE worker_claims SET lease_until = $3, updated_at = $4
		WHERE key = $1 AND owner = $2 AND state = 'held'`, key, owner, until, now)
}

func (d stmts) Complete(ctx context.Context, key, owner string, now time.Time) (int64, error) {
	return d.exec(ctx, `UPDATE worker_claims SET state = 'done', lease_until = NULL,
		completions = completions + 1, updated_at = $3
		WHERE key = $1 AND owner = $2 AND state = 'held'`, key, owner, now)
}

func (d stmts) Release(ctx context.Context, key, owner string, now time.Time) (int64, error) {
	return d.exec(ctx, `UPDATE worker_claims SET state = 'released', lease_until = $3, updated_at = $3
		WHERE key = $1 AND owner = $2 AND state = 'held'`, key, owner, now)
}

func (d stmts) Proof(ctx context.Context) (sqlclaims.Rows, error) {
	return d.pool.Query(ctx, worker.ProofQuery)
}

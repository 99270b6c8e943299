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
	pool *pgxpool.Pool
	now  func() time.Time
	own  bool
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
	if now == nil {
		now = time.Now
	}
	return &Claims{pool: pool, now: now}
}

// Pool returns the connection pool.
func (c *Claims) Pool() *pgxpool.Pool { return c.pool }

// Close closes the pool when Open opened it.
func (c *Claims) Close() {
	if c.own {
		c.pool.Close()
	}
}

// Claim implements worker.Claims.
func (c *Claims) Claim(ctx context.Context, key, owner string, lease time.Duration) (worker.Claim, error) {
	if key == "" || owner == "" {
		return worker.Claim{}, errors.New("pgclaims: claim needs a key and an owner")
	}
	now := c.now()
	until := now.Add(lease)
	var got string
	err := c.pool.QueryRow(ctx, `INSERT INTO worker_claims AS w (key, state, owner, lease_until, completions, claimed_at, updated_at)
		VALUES ($1, 'held', $2, $3, 0, $4, $4)
		ON CONFLICT (key) DO UPDATE SET state = 'held', owner = excluded.owner, lease_until = excluded.lease_until,
			claimed_at = excluded.claimed_at, updated_at = excluded.updated_at
		WHERE w.state = 'released' OR (w.state = 'held' AND w.lease_until <= $4)
		RETURNING owner`, key, owner, until, now).Scan(&got)
	if err == nil {
		return worker.Claim{Status: worker.Claimed, Owner: owner, LeaseUntil: until}, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return worker.Claim{}, fmt.Errorf("pgclaims: claim: %w", err)
	}
	var state, holder string
	var leaseUntil *time.Time
	if err := c.pool.QueryRow(ctx, `SELECT state, owner, lease_until FROM worker_claims WHERE key = $1`, key).
		Scan(&state, &holder, &leaseUntil); err != nil {
		return worker.Claim{}, fmt.Errorf("pgclaims: claim: %w", err)
	}
	if state == "done" {
		return worker.Claim{Status: worker.AlreadyDone, Owner: holder}, nil
	}
	cl := worker.Claim{Status: worker.HeldElsewhere, Owner: holder}
	if leaseUntil != nil {
		cl.LeaseUntil = *leaseUntil
	}
	return cl, nil
}

func (c *Claims) fenced(ctx context.Context, op, key, query string, args ...any) error {
	tag, err := c.pool.Exec(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("pgclaims: %s: %w", op, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("pgclaims: %s %q: %w", op, key, worker.ErrClaimLost)
	}
	return nil
}

// Extend implements worker.Claims.
func (c *Claims) Extend(ctx context.Context, key, owner string, lease time.Duration) error {
	now := c.now()
	return c.fenced(ctx, "extend", key, `UPDATE worker_claims SET lease_until = $3, updated_at = $4
		WHERE key = $1 AND owner = $2 AND state = 'held'`, key, owner, now.Add(lease), now)
}

// Complete implements worker.Claims.
func (c *Claims) Complete(ctx context.Context, key, owner string) error {
	return c.fenced(ctx, "complete", key, `UPDATE worker_claims SET state = 'done', lease_until = NULL,
		completions = completions + 1, updated_at = $3
		WHERE key = $1 AND owner = $2 AND state = 'held'`, key, owner, c.now())
}

// Release implements worker.Claims.
func (c *Claims) Release(ctx context.Context, key, owner string) error {
	now := c.now()
	return c.fenced(ctx, "release", key, `UPDATE worker_claims SET state = 'released', lease_until = $3, updated_at = $3
		WHERE key = $1 AND owner = $2 AND state = 'held'`, key, owner, now)
}

// Violations runs worker.ProofQuery and returns the keys it finds: none
// when every key has at most one terminal result.
func (c *Claims) Violations(ctx context.Context) ([]string, error) {
	rows, err := c.pool.Query(ctx, worker.ProofQuery)
	if err != nil {
		return nil, fmt.Errorf("pgclaims: proof query: %w", err)
	}
	defer rows.Close()
	var bad []string
	for rows.Next() {
		var key, state string
		var n int
		if err := rows.Scan(&key, &state, &n); err != nil {
			return nil, err
		}
		bad = append(bad, fmt.Sprintf("%s (%s, %d completions)", key, state, n))
	}
	return bad, rows.Err()
}

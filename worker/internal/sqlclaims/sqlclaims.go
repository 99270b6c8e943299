// Package sqlclaims holds what the SQL claim stores (worker/pgclaims and
// worker/sqliteclaims) share apart from their SQL: the rules of
// worker.Claims around the statements, their errors, and the report of
// worker.ProofQuery. Each store supplies its statements (a DB) and embeds
// the Claims built over them.
package sqlclaims

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quarantine-dev/quarantine/worker"
)

// DB is one store's statements on the worker_claims table.
type DB interface {
	// Take takes key for owner until until, at now, when the key is new,
	// released, or held under a lease expired at now; taken is false
	// otherwise (nothing written).
	Take(ctx context.Context, key, owner string, until, now time.Time) (taken bool, err error)
	// Holder reads the state and owner of key, and its lease's end (the
	// zero time when it has none).
	Holder(ctx context.Context, key string) (state, owner string, leaseUntil time.Time, err error)
	// Extend, Complete and Release change key where owner holds it, at
	// now, and return how many rows they changed (0: owner does not hold
	// it). Extend moves the lease to until; Complete marks it done and
	// counts the completion; Release frees it.
	Extend(ctx context.Context, key, owner string, until, now time.Time) (int64, error)
	Complete(ctx context.Context, key, owner string, now time.Time) (int64, error)
	Release(ctx context.Context, key, owner string, now time.Time) (int64, error)
	// Proof runs worker.ProofQuery.
	Proof(ctx context.Context) (Rows, error)
}

// Rows are the rows of a query (pgx's, or database/sql's behind Close).
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// Claims is worker.Claims and worker.Prover over a store's DB. Safe for
// concurrent use when the DB is.
type Claims struct {
	name string // the store's package, the prefix of its errors
	db   DB
	now  func() time.Time
}

// New returns the claims of the store name (its errors' prefix) over db,
// reading the clock now (time.Now when nil).
func New(name string, db DB, now func() time.Time) *Claims {
	if now == nil {
		now = time.Now
	}
	return &Claims{name: name, db: db, now: now}
}

// Claim implements worker.Claims.
func (c *Claims) Claim(ctx context.Context, key, owner string, lease time.Duration) (worker.Claim, error) {
	if key == "" || owner == "" {
		return worker.Claim{}, errors.New(c.name + ": claim needs a key and an owner")
	}
	now := c.now()
	until := now.Add(lease)
	taken, err := c.db.Take(ctx, key, owner, until, now)
	if err != nil {
		return worker.Claim{}, fmt.Errorf("%s: claim: %w", c.name, err)
	}
	if taken {
		return worker.Claim{Status: worker.Claimed, Owner: owner, LeaseUntil: until}, nil
	}
	state, holder, leaseUntil, err := c.db.Holder(ctx, key)
	if err != nil {
		return worker.Claim{}, fmt.Errorf("%s: claim: %w", c.name, err)
	}
	if state == "done" {
		return worker.Claim{Status: worker.AlreadyDone, Owner: holder}, nil
	}
	return worker.Claim{Status: worker.HeldElsewhere, Owner: holder, LeaseUntil: leaseUntil}, nil
}

// fenced returns the error of a fenced change op of key that changed n
// rows: ErrClaimLost when none.
func (c *Claims) fenced(op, key string, n int64, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %s: %w", c.name, op, err)
	}
	if n == 0 {
		return fmt.Errorf("%s: %s %q: %w", c.name, op, key, worker.ErrClaimLost)
	}
	return nil
}

// Extend implements worker.Claims.
func (c *Claims) Extend(ctx context.Context, key, owner string, lease time.Duration) error {
	now := c.now()
	n, err := c.db.Extend(ctx, key, owner, now.Add(lease), now)
	return c.fenced("extend", key, n, err)
}

// Complete implements worker.Claims.
func (c *Claims) Complete(ctx context.Context, key, owner string) error {
	n, err := c.db.Complete(ctx, key, owner, c.now())
	return c.fenced("complete", key, n, err)
}

// Release implements worker.Claims.
func (c *Claims) Release(ctx context.Context, key, owner string) error {
	n, err := c.db.Release(ctx, key, owner, c.now())
	return c.fenced("release", key, n, err)
}

// Violations runs worker.ProofQuery and returns the keys it finds: none
// when every key has at most one terminal result.
func (c *Claims) Violations(ctx context.Context) ([]string, error) {
	rows, err := c.db.Proof(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: proof query: %w", c.name, err)
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

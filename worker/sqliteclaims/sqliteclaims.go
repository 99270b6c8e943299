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
	db  *sql.DB
	now func() time.Time
	own bool // Close closes db
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
	if now == nil {
		now = time.Now
	}
	return &Claims{db: db, now: now}
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

// Claim implements worker.Claims.
func (c *Claims) Claim(ctx context.Context, key, owner string, lease time.Duration) (worker.Claim, error) {
	if key == "" || owner == "" {
		return worker.Claim{}, errors.New("sqliteclaims: claim needs a key and an owner")
	}
	now := c.now()
	until := now.Add(lease)
	var got string
	err := c.db.QueryRowContext(ctx, `INSERT INTO worker_claims (key, state, owner, lease_until, completions, claimed_at, updated_at)
		VALUES (?1, 'held', ?2, ?3, 0, ?4, ?4)
		ON CONFLICT (key) DO UPDATE SET state = 'held', owner = excluded.owner, lease_until = excluded.lease_until,
			claimed_at = excluded.claimed_at, updated_at = excluded.updated_at
		WHERE worker_claims.state = 'released' OR (worker_claims.state = 'held' AND worker_claims.lease_until <= ?4)
		RETURNING owner`, key, owner, until.UnixNano(), now.UnixNano()).Scan(&got)
	if err == nil {
		return worker.Claim{Status: worker.Claimed, Owner: owner, LeaseUntil: until}, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return worker.Claim{}, fmt.Errorf("sqliteclaims: claim: %w", err)
	}
	var state, holder string
	var leaseNS int64
	if err := c.db.QueryRowContext(ctx, `SELECT state, owner, lease_until FROM worker_claims WHERE key = ?`, key).
		Scan(&state, &holder, &leaseNS); err != nil {
		return worker.Claim{}, fmt.Errorf("sqliteclaims: claim: %w", err)
	}
	if state == "done" {
		return worker.Claim{Status: worker.AlreadyDone, Owner: holder}, nil
	}
	return worker.Claim{Status: worker.HeldElsewhere, Owner: holder, LeaseUntil: time.Unix(0, leaseNS)}, nil
}

func (c *Claims) fenced(ctx context.Context, op, key, query string, args ...any) error {
	res, err := c.db.ExecContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("sqliteclaims: %s: %w", op, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("sqliteclaims: %s: %w", op, err)
	} else if n == 0 {
		return fmt.Errorf("sqliteclaims: %s %q: %w", op, key, worker.ErrClaimLost)
	}
	return nil
}

// Extend implements worker.Claims.
func (c *Claims) Extend(ctx context.Context, key, owner string, lease time.Duration) error {
	now := c.now()
	return c.fenced(ctx, "extend", key, `UPDATE worker_claims SET lease_until = ?3, updated_at = ?4
		WHERE key = ?1 AND owner = ?2 AND state = 'held'`, key, owner, now.Add(lease).UnixNano(), now.UnixNano())
}

// Complete implements worker.Claims.
func (c *Claims) Complete(ctx context.Context, key, owner string) error {
	return c.fenced(ctx, "complete", key, `UPDATE worker_claims SET state = 'done', lease_until = 0,
		completions = completions + 1, updated_at = ?3
		WHERE key = ?1 AND owner = ?2 AND state = 'held'`, key, owner, c.now().UnixNano())
}

// Release implements worker.Claims.
func (c *Claims) Release(ctx context.Context, key, owner string) error {
	now := c.now().UnixNano()
	return c.fenced(ctx, "release", key, `UPDATE worker_claims SET state = 'released', lease_until = ?3, updated_at = ?3
		WHERE key = ?1 AND owner = ?2 AND state = 'held'`, key, owner, now)
}

// Violations runs worker.ProofQuery and returns the keys it finds: none
// when every key has at most one terminal result.
func (c *Claims) Violations(ctx context.Context) ([]string, error) {
	rows, err := c.db.QueryContext(ctx, worker.ProofQuery)
	if err != nil {
		return nil, fmt.Errorf("sqliteclaims: proof query: %w", err)
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

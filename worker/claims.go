package worker

import (
	"context"
	_ "embed"
	"fmt"
	"sort"
	"sync"
	"time"
)

// ClaimStatus is the answer to a Claim.
type ClaimStatus int

const (
	// Claimed: the caller holds the key until the lease expires.
	Claimed ClaimStatus = iota + 1
	// AlreadyDone: the key's job completed before; ack without running.
	AlreadyDone
	// HeldElsewhere: another owner holds a live lease on the key.
	HeldElsewhere
)

func (s ClaimStatus) String() string {
	switch s {
	case Claimed:
		return "claimed"
	case AlreadyDone:
		return "already_done"
	case HeldElsewhere:
		return "held_elsewhere"
	}
	return fmt.Sprintf("ClaimStatus(%d)", int(s))
}

// Claim is the state of an idempotency key after a Claim call.
type Claim struct {
	Status ClaimStatus
	// Owner is the token holding the key (the caller's when Claimed).
	Owner string
	// LeaseUntil is when the holder's lease expires (zero when done).
	LeaseUntil time.Time
}

// Claims stores idempotency-key claims durably: key, owner token and lease
// expiry. A key is in one of three states: held (by an owner, until its
// lease expires), done (terminal and sticky), released (free to claim
// again). Implementations: MemoryClaims, worker/sqliteclaims,
// worker/pgclaims; worker/claimtest is their conformance suite.
type Claims interface {
	// Claim takes key for owner for lease, when the key is new, released,
	// or held under an expired lease (a takeover). Otherwise it reports
	// AlreadyDone or HeldElsewhere, and the caller does not hold it.
	Claim(ctx context.Context, key, owner string, lease time.Duration) (Claim, error)
	// Extend moves the lease of key held by owner to now+lease. It
	// returns ErrClaimLost when owner does not hold key.
	Extend(ctx context.Context, key, owner string, lease time.Duration) error
	// Complete marks key done (its one terminal result), fenced by owner:
	// ErrClaimLost when owner does not hold key.
	Complete(ctx context.Context, key, owner string) error
	// Release frees key held by owner so that a later delivery (a
	// replay) runs it; ErrClaimLost when owner does not hold key.
	Release(ctx context.Context, key, owner string) error
}

// ProofQuery is the SQL (worker/claims.sql, PostgreSQL and SQLite) that
// proves one terminal result per key: it returns every key of
// worker_claims whose completions counter is not 1 while done, or not 0
// while held or released. It returns no rows when the invariant holds.
//
//go:embed claims.sql
var ProofQuery string

// Prover is implemented by every Claims of this module: Violations runs
// ProofQuery (or its in-memory equivalent) and returns the keys that have
// more than one terminal result, or whose state disagrees with their
// count; none when the invariant holds.
type Prover interface {
	Violations(ctx context.Context) ([]string, error)
}

// MemoryClaims is an in-process Claims, for tests and single-process
// demos: nothing survives the process. The zero value is not usable: call
// NewMemoryClaims.
type MemoryClaims struct {
	mu   sync.Mutex
	now  func() time.Time
	keys map[string]*memClaim
}

type memClaim struct {
	state       string // held, done, released
	owner       string
	leaseUntil  time.Time
	completions int
}

var (
	_ Claims = (*MemoryClaims)(nil)
	_ Prover = (*MemoryClaims)(nil)
)

// NewMemoryClaims returns empty in-memory claims reading time from now
// (time.Now when nil).
func NewMemoryClaims(now func() time.Time) *MemoryClaims {
	if now == nil {
		now = time.Now
	}
	return &MemoryClaims{now: now, keys: map[string]*memClaim{}}
}

// Claim implements Claims.
func (m *MemoryClaims) Claim(_ context.Context, key, owner string, lease time.Duration) (Claim, error) {
	if key == "" || owner == "" {
		return Claim{}, fmt.Errorf("worker: claim needs a key and an owner")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	c, ok := m.keys[key]
	switch {
	case !ok:
		c = &memClaim{}
		m.keys[key] = c
	case c.state == "done":
		return Claim{Status: AlreadyDone, Owner: c.owner}, nil
	case c.state == "held" && c.leaseUntil.After(now):
		return Claim{Status: HeldElsewhere, Owner: c.owner, LeaseUntil: c.leaseUntil}, nil
	}
	c.state, c.owner, c.leaseUntil = "held", owner, now.Add(lease)
	return Claim{Status: Claimed, Owner: owner, LeaseUntil: c.leaseUntil}, nil
}

func (m *MemoryClaims) held(key, owner string) (*memClaim, error) {
	c, ok := m.keys[key]
	if !ok || c.state != "held" || c.owner != owner {
		return nil, fmt.Errorf("worker: key %q: %w", key, ErrClaimLost)
	}
	return c, nil
}

// Extend implements Claims.
func (m *MemoryClaims) Extend(_ context.Context, key, owner string, lease time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, err := m.held(key, owner)
	if err != nil {
		return err
	}
	c.leaseUntil = m.now().Add(lease)
	return nil
}

// Complete implements Claims.
func (m *MemoryClaims) Complete(_ context.Context, key, owner string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, err := m.held(key, owner)
	if err != nil {
		return err
	}
	c.state, c.leaseUntil = "done", time.Time{}
	c.completions++
	return nil
}

// Release implements Claims.
func (m *MemoryClaims) Release(_ context.Context, key, owner string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, err := m.held(key, owner)
	if err != nil {
		return err
	}
	c.state, c.leaseUntil = "released", m.now()
	return nil
}

// Done reports whether key completed.
func (m *MemoryClaims) Done(key string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.keys[key]
	return ok && c.state == "done"
}

// Violations is ProofQuery over the in-memory table: the keys, sorted,
// whose completions counter disagrees with their state. Empty when every
// key has at most one terminal result. It never fails.
func (m *MemoryClaims) Violations(context.Context) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var bad []string
	for k, c := range m.keys {
		if c.completions > 1 || (c.state == "done") != (c.completions == 1) {
			bad = append(bad, k)
		}
	}
	sort.Strings(bad)
	return bad, nil
}

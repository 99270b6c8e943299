// Package claimtest is the conformance suite every worker.Claims
// implementation runs (worker.MemoryClaims, worker/sqliteclaims,
// worker/pgclaims): the same cases, both sides of every lease boundary,
// and worker.ProofQuery (Prover.Violations) empty after each case.
package claimtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine/internal/testclock"
	"github.com/quarantine-dev/quarantine/worker"
)

// Clock is a settable clock for tests, safe for concurrent use.
type Clock = testclock.Clock

// NewClock returns a clock set to t.
func NewClock(t time.Time) *Clock { return testclock.New(t) }

// Start is the time every case starts at.
var Start = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// Factory returns empty claims, reading time from now, that also
// implement worker.Prover. It is called once per case.
type Factory func(t *testing.T, now func() time.Time) worker.Claims

const lease = 5 * time.Minute

// Run runs every case against the claims newClaims makes.
func Run(t *testing.T, newClaims Factory) {
	cases := []struct {
		name string
		run  func(t *testing.T, c worker.Claims, clk *Clock)
	}{
		{"NewKeyIsClaimed", newKeyIsClaimed},
		{"LiveLeaseIsHeldElsewhere", liveLeaseIsHeldElsewhere},
		{"LeaseBoundary", leaseBoundary},
		{"ExpiredLeaseIsTakenOverAndOldOwnerFenced", takeover},
		{"CompletedKeyIsAlreadyDoneForever", completedIsDone},
		{"ReleasedKeyRunsAgain", releasedRunsAgain},
		{"CompleteAndReleaseAreFenced", fencing},
		{"ExtendMovesTheLease", extendMovesLease},
		{"ConcurrentClaimsOneWinner", concurrentOneWinner},
		{"EmptyKeyIsRefused", emptyKeyRefused},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clk := NewClock(Start)
			c := newClaims(t, clk.Now)
			tc.run(t, c, clk)
			AssertProof(t, c)
		})
	}
}

// AssertProof fails t when c's proof query finds a key with more than one
// terminal result (or a state that disagrees with its count).
func AssertProof(t testing.TB, c worker.Claims) {
	t.Helper()
	p, ok := c.(worker.Prover)
	if !ok {
		t.Fatalf("%T does not implement worker.Prover", c)
	}
	bad, err := p.Violations(context.Background())
	if err != nil {
		t.Fatalf("proof query: %v", err)
	}
	if len(bad) > 0 {
		t.Fatalf("proof query: keys breaking one terminal result per key: %v", bad)
	}
}

func must(t *testing.T, c worker.Claims, key, owner string, want worker.ClaimStatus) worker.Claim {
	t.Helper()
	got, err := c.Claim(context.Background(), key, owner, lease)
	if err != nil {
		t.Fatalf("Claim(%s, %s): %v", key, owner, err)
	}
	if got.Status != want {
		t.Fatalf("Claim(%s, %s) = %v (owner %s), want %v", key, owner, got.Status, got.Owner, want)
	}
	return got
}

func lost(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, worker.ErrClaimLost) {
		t.Fatalf("%s = %v, want ErrClaimLost", what, err)
	}
}

func ok(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func newKeyIsClaimed(t *testing.T, c worker.Claims, clk *Clock) {
	got := must(t, c, "k", "a", worker.Claimed)
	if got.Owner != "a" || !got.LeaseUntil.Equal(clk.Now().Add(lease)) {
		t.Fatalf("claim = %+v, want owner a until %s", got, clk.Now().Add(lease))
	}
}

func liveLeaseIsHeldElsewhere(t *testing.T, c worker.Claims, clk *Clock) {
	must(t, c, "k", "a", worker.Claimed)
	clk.Advance(time.Minute)
	got := must(t, c, "k", "b", worker.HeldElsewhere)
	if got.Owner != "a" || !got.LeaseUntil.Equal(Start.Add(lease)) {
		t.Fatalf("held claim = %+v, want owner a until %s", got, Start.Add(lease))
	}
	// The same owner token does not get it twice either: tokens are per delivery.
	must(t, c, "k", "a", worker.HeldElsewhere)
}

func leaseBoundary(t *testing.T, c worker.Claims, clk *Clock) {
	must(t, c, "k", "a", worker.Claimed)
	clk.Advance(lease - time.Millisecond)
	must(t, c, "k", "b", worker.HeldElsewhere)
	clk.Advance(time.Millisecond) // exactly at lease_until: expired
	must(t, c, "k", "b", worker.Claimed)
}

func takeover(t *testing.T, c worker.Claims, clk *Clock) {
	ctx := context.Background()
	must(t, c, "k", "a", worker.Claimed)
	clk.Advance(lease + time.Second)
	must(t, c, "k", "b", worker.Claimed)
	lost(t, "Complete by the old owner", c.Complete(ctx, "k", "a"))
	lost(t, "Extend by the old owner", c.Extend(ctx, "k", "a", lease))
	lost(t, "Release by the old owner", c.Release(ctx, "k", "a"))
	ok(t, "Complete by the new owner", c.Complete(ctx, "k", "b"))
	must(t, c, "k", "c", worker.AlreadyDone)
}

func completedIsDone(t *testing.T, c worker.Claims, clk *Clock) {
	ctx := context.Background()
	must(t, c, "k", "a", worker.Claimed)
	ok(t, "Complete", c.Complete(ctx, "k", "a"))
	must(t, c, "k", "b", worker.AlreadyDone)
	clk.Advance(1000 * time.Hour)
	must(t, c, "k", "c", worker.AlreadyDone)
	lost(t, "a second Complete", c.Complete(ctx, "k", "a"))
	lost(t, "Release after Complete", c.Release(ctx, "k", "a"))
	lost(t, "Extend after Complete", c.Extend(ctx, "k", "a", lease))
	must(t, c, "k", "d", worker.AlreadyDone)
}

func releasedRunsAgain(t *testing.T, c worker.Claims, clk *Clock) {
	ctx := context.Background()
	must(t, c, "k", "a", worker.Claimed)
	ok(t, "Release", c.Release(ctx, "k", "a")) // dead-lettered: its replay must run
	clk.Advance(time.Second)
	must(t, c, "k", "replay", worker.Claimed)
	lost(t, "Complete by the releaser", c.Complete(ctx, "k", "a"))
	ok(t, "Complete by the replay", c.Complete(ctx, "k", "replay"))
	must(t, c, "k", "again", worker.AlreadyDone)
}

func fencing(t *testing.T, c worker.Claims, _ *Clock) {
	ctx := context.Background()
	lost(t, "Complete of an unknown key", c.Complete(ctx, "nope", "a"))
	lost(t, "Release of an unknown key", c.Release(ctx, "nope", "a"))
	lost(t, "Extend of an unknown key", c.Extend(ctx, "nope", "a", lease))
	must(t, c, "k", "a", worker.Claimed)
	lost(t, "Complete by a stranger", c.Complete(ctx, "k", "x"))
	lost(t, "Release by a stranger", c.Release(ctx, "k", "x"))
	ok(t, "Release", c.Release(ctx, "k", "a"))
	lost(t, "Release twice", c.Release(ctx, "k", "a"))
	lost(t, "Complete after Release", c.Complete(ctx, "k", "a"))
}

func extendMovesLease(t *testing.T, c worker.Claims, clk *Clock) {
	ctx := context.Background()
	must(t, c, "k", "a", worker.Claimed)
	clk.Advance(4 * time.Minute)
	ok(t, "Extend", c.Extend(ctx, "k", "a", lease)) // now until Start+9m
	clk.Advance(4*time.Minute + 59*time.Second)     // Start+8m59s: past the first lease
	got := must(t, c, "k", "b", worker.HeldElsewhere)
	if !got.LeaseUntil.Equal(Start.Add(9 * time.Minute)) {
		t.Fatalf("lease until %s, want %s", got.LeaseUntil, Start.Add(9*time.Minute))
	}
	clk.Advance(time.Second)
	must(t, c, "k", "b", worker.Claimed)
}

func concurrentOneWinner(t *testing.T, c worker.Claims, _ *Clock) {
	ctx := context.Background()
	const n = 16
	var wg sync.WaitGroup
	res := make([]worker.Claim, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i], errs[i] = c.Claim(ctx, "hot", fmt.Sprintf("o%d", i), lease)
		}()
	}
	wg.Wait()
	winners := 0
	for i := range n {
		ok(t, "Claim", errs[i])
		if res[i].Status == worker.Claimed {
			winners++
			ok(t, "Complete by the winner", c.Complete(ctx, "hot", res[i].Owner))
		}
	}
	if winners != 1 {
		t.Fatalf("%d concurrent claims won, want 1", winners)
	}
}

func emptyKeyRefused(t *testing.T, c worker.Claims, _ *Clock) {
	if _, err := c.Claim(context.Background(), "", "a", lease); err == nil {
		t.Fatal("Claim with an empty key succeeded")
	}
}

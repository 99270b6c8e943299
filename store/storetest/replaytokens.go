package storetest

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store"
)

func testReplayTokens(t *testing.T, h Harness) {
	t.Run("Budget", func(t *testing.T) { t.Parallel(); testReplayTokenBudget(t, h) })
	t.Run("Shared", func(t *testing.T) { t.Parallel(); testReplayTokensShared(t, h) })
	t.Run("Hold", func(t *testing.T) { t.Parallel(); testReplayTokensHold(t, h) })
	t.Run("LeaseWithin", func(t *testing.T) { t.Parallel(); testReplayLeaseWithin(t, h) })
	t.Run("LeaseAhead", func(t *testing.T) { t.Parallel(); testReplayLeaseAhead(t, h) })
	t.Run("AheadWithinTheRate", func(t *testing.T) { t.Parallel(); testReplayTokensAheadWithinTheRate(t, h) })
}

func testReplayTokenBudget(t *testing.T, h Harness) {
	s, clock := openClock(t, h)
	ctx := t.Context()
	b := []quarantine.RateBucket{{Key: "batch:x", Rate: 5, Burst: 3}}
	n, wait, err := s.TakeReplayTokens(ctx, b, 10)
	wantOK(t, err, "TakeReplayTokens")
	if n != 3 || wait != 0 {
		t.Fatalf("a new bucket gave %d (wait %s), want its burst of 3", n, wait)
	}
	n, wait, err = s.TakeReplayTokens(ctx, b, 1)
	wantOK(t, err, "TakeReplayTokens")
	if n != 0 || wait <= 0 || wait > 200*time.Millisecond {
		t.Fatalf("an empty bucket gave %d, wait %s; want 0 and at most 200ms", n, wait)
	}
	clock.Add(wait)
	n, _, err = s.TakeReplayTokens(ctx, b, 5)
	wantOK(t, err, "TakeReplayTokens")
	if n != 1 {
		t.Fatalf("after the wait: %d tokens, want 1", n)
	}

	// Random demands at random times never exceed rate*elapsed + burst.
	rng := rand.New(rand.NewPCG(1, 2))
	start := clock.Now()
	total := 0
	for range 300 {
		clock.Add(time.Duration(rng.IntN(150)) * time.Millisecond)
		n, wait, err := s.TakeReplayTokens(ctx, b, 1+rng.IntN(4))
		wantOK(t, err, "TakeReplayTokens")
		if n == 0 && wait <= 0 {
			t.Fatal("no token and no wait")
		}
		total += n
		limit := int(math.Floor(5*clock.Now().Sub(start).Seconds()+3+1e-6)) + 0
		if total > limit {
			t.Fatalf("granted %d tokens in %s, more than rate*elapsed+burst = %d", total, clock.Now().Sub(start), limit)
		}
	}
	if total < 5*int(clock.Now().Sub(start).Seconds())/2 {
		t.Fatalf("granted only %d tokens in %s", total, clock.Now().Sub(start))
	}
	_, _, err = s.TakeReplayTokens(ctx, []quarantine.RateBucket{{Key: "k", Rate: 0}}, 1)
	wantCode(t, err, quarantine.EINVALID)
}

func testReplayTokensShared(t *testing.T, h Harness) {
	s, clock := openClock(t, h)
	ctx := t.Context()
	batch := quarantine.RateBucket{Key: "batch:a", Rate: 100, Burst: 10}
	dest := quarantine.RateBucket{Key: "dest:rabbitmq/orders", Rate: 2, Burst: 2}
	n, _, err := s.TakeReplayTokens(ctx, []quarantine.RateBucket{batch, dest}, 50)
	wantOK(t, err, "TakeReplayTokens")
	if n != 2 {
		t.Fatalf("two buckets gave %d, want the scarcer one's 2", n)
	}
	n, wait, err := s.TakeReplayTokens(ctx, []quarantine.RateBucket{dest, batch}, 1)
	wantOK(t, err, "TakeReplayTokens")
	if n != 0 || wait < 400*time.Millisecond || wait > 500*time.Millisecond {
		t.Fatalf("got %d, wait %s; want 0 and the destination's 0.5s", n, wait)
	}
	// The batch bucket lent both tokens: it holds 8 now, not 10.
	clock.Add(time.Second)
	n, _, err = s.TakeReplayTokens(ctx, []quarantine.RateBucket{batch}, 50)
	wantOK(t, err, "TakeReplayTokens")
	if n != 10 {
		t.Fatalf("the batch bucket refilled to %d, want its burst 10", n)
	}
	n, _, err = s.TakeReplayTokens(ctx, []quarantine.RateBucket{dest}, 50)
	wantOK(t, err, "TakeReplayTokens")
	if n != 2 {
		t.Fatalf("the destination refilled to %d after 1s, want 2", n)
	}
}

// A hold (a destination's Retry-After) empties the bucket and keeps it
// empty until its end, for every engine; it then refills at its rate.
func testReplayTokensHold(t *testing.T, h Harness) {
	s, clock := openClock(t, h)
	ctx := t.Context()
	dest := quarantine.RateBucket{Key: "dest:http/work", Rate: 10, Burst: 5}
	n, _, err := s.TakeReplayTokens(ctx, []quarantine.RateBucket{dest}, 1)
	wantOK(t, err, "TakeReplayTokens")
	if n != 1 {
		t.Fatalf("took %d", n)
	}
	wantOK(t, s.HoldReplayTokens(ctx, dest.Key, clock.Now().Add(30*time.Second)), "HoldReplayTokens")
	wantOK(t, s.HoldReplayTokens(ctx, dest.Key, clock.Now().Add(time.Second)), "an earlier hold")
	clock.Add(29 * time.Second)
	if n, _, err = s.TakeReplayTokens(ctx, []quarantine.RateBucket{dest}, 5); err != nil || n != 0 {
		t.Fatalf("during the hold: %d tokens (%v), want 0", n, err)
	}
	clock.Add(1500 * time.Millisecond) // 0.5s after the hold ended: 5 tokens at 10/s
	if n, _, err = s.TakeReplayTokens(ctx, []quarantine.RateBucket{dest}, 10); err != nil || n != 5 {
		t.Fatalf("after the hold: %d tokens (%v), want 5", n, err)
	}
	// A bucket not seen yet is held too.
	wantOK(t, s.HoldReplayTokens(ctx, "dest:new", clock.Now().Add(time.Minute)), "HoldReplayTokens")
	if n, _, err = s.TakeReplayTokens(ctx, []quarantine.RateBucket{{Key: "dest:new", Rate: 100, Burst: 100}}, 1); err != nil || n != 0 {
		t.Fatalf("a new bucket on hold gave %d (%v)", n, err)
	}
}

// tokenLeaser is the lease that reserves its rate tokens in the same
// transaction (replay.TokenLeaser); every store implements it.
type tokenLeaser interface {
	LeaseReplayItemsWithin(ctx context.Context, batchID, owner string, n int, ttl time.Duration, maxSeq int,
		buckets []quarantine.RateBucket, ahead time.Duration) ([]quarantine.ReplayLease, time.Time, time.Duration, error)
}

// leaseSetup opens a store with a clock of the test's and returns it with
// its tokenLeaser and a batch of n new messages.
func leaseSetup(t *testing.T, h Harness, n int) (store.Store, *testClock, tokenLeaser, *quarantine.ReplayBatch) {
	t.Helper()
	s, clock := openClock(t, h)
	l, ok := s.(tokenLeaser)
	if !ok {
		t.Fatalf("%T has no LeaseReplayItemsWithin", s)
	}
	var msgs []*quarantine.Message
	for range n {
		msgs = append(msgs, newMsg())
	}
	insert(t, s, msgs...)
	return s, clock, l, createReplay(t, s, replayReq(ids(msgs)...), nil)
}

// testReplayLeaseWithin: a lease that takes its tokens leases no more
// items than the buckets grant, takes them from the budget TakeReplayTokens
// shares, and leases nothing (with a wait) when no token is there.
func testReplayLeaseWithin(t *testing.T, h Harness) {
	s, clock, l, batch := leaseSetup(t, h, 10)
	ctx := t.Context()
	bs := []quarantine.RateBucket{{Key: "dest:x", Rate: 2, Burst: 4}, {Key: "batch:" + batch.ID, Rate: 100, Burst: 100}}
	got, due, wait, err := l.LeaseReplayItemsWithin(ctx, batch.ID, "engine-1", 10, time.Minute, 0, bs, 0)
	wantOK(t, err, "LeaseReplayItemsWithin")
	if !slices.Equal(leaseSeqs(got), []int{0, 1, 2, 3}) || wait != 0 || got[0].Fence != 1 || got[0].Message == nil {
		t.Fatalf("first lease %v (wait %s), want the burst of 4: seqs 0-3", leaseSeqs(got), wait)
	}
	// (The store's clock keeps microseconds.)
	if d := due.Sub(clock.Now()); d < -time.Microsecond || d > time.Microsecond {
		t.Fatalf("taken with no ahead, the tokens are due %s after now, want now", d)
	}
	got, _, wait, err = l.LeaseReplayItemsWithin(ctx, batch.ID, "engine-2", 10, time.Minute, 0, bs, 0)
	wantOK(t, err, "LeaseReplayItemsWithin")
	if len(got) != 0 || wait <= 0 || wait > 500*time.Millisecond {
		t.Fatalf("with no token: leased %v, wait %s; want nothing and at most 500ms", leaseSeqs(got), wait)
	}
	// The same budget as TakeReplayTokens.
	clock.Add(time.Second)
	n, _, err := s.TakeReplayTokens(ctx, bs[:1], 1)
	wantOK(t, err, "TakeReplayTokens")
	if n != 1 {
		t.Fatalf("TakeReplayTokens after 1s gave %d, want 1", n)
	}
	got, _, _, err = l.LeaseReplayItemsWithin(ctx, batch.ID, "engine-2", 10, time.Minute, 0, bs, 0)
	wantOK(t, err, "LeaseReplayItemsWithin")
	if !slices.Equal(leaseSeqs(got), []int{4}) {
		t.Fatalf("after 1s and one token taken elsewhere: leased %v, want [4]", leaseSeqs(got))
	}
	// No free item: no token is taken.
	clock.Add(10 * time.Second)
	got, _, _, err = l.LeaseReplayItemsWithin(ctx, batch.ID, "engine-2", 10, time.Minute, 2, bs, time.Second)
	wantOK(t, err, "LeaseReplayItemsWithin")
	if len(got) != 0 {
		t.Fatalf("past the canary bound: leased %v", leaseSeqs(got))
	}
	n, _, err = s.TakeReplayTokens(ctx, bs[:1], 10)
	wantOK(t, err, "TakeReplayTokens")
	if n != 4 {
		t.Fatalf("a lease of nothing took tokens: %d left of the burst 4", n)
	}
	_, _, _, err = l.LeaseReplayItemsWithin(ctx, batch.ID, "engine-2", 1, time.Minute, 0, []quarantine.RateBucket{{Key: "k"}}, 0)
	wantCode(t, err, quarantine.EINVALID)
}

// testReplayLeaseAhead: a lease may reserve its tokens ahead of the
// refill, by at most ahead: it leases its items now and says when their
// tokens are due; every other taker of the budget, ahead or not, comes
// after.
func testReplayLeaseAhead(t *testing.T, h Harness) {
	s, clock, l, batch := leaseSetup(t, h, 12)
	ctx := t.Context()
	bs := []quarantine.RateBucket{{Key: "dest:y", Rate: 10, Burst: 4}, {Key: "batch:" + batch.ID, Rate: 100, Burst: 100}}
	start := clock.Now()
	ahead := 500 * time.Millisecond
	steps := []struct {
		seqs []int
		due  time.Duration // after start
	}{
		{[]int{0, 1, 2, 3}, 0},                      // the burst, due now
		{[]int{4, 5, 6, 7}, 400 * time.Millisecond}, // refilled by 0.4 s
		{[]int{8}, 500 * time.Millisecond},          // only one more within ahead
	}
	for i, st := range steps {
		got, due, wait, err := l.LeaseReplayItemsWithin(ctx, batch.ID, "engine-1", 4, time.Minute, 0, bs, ahead)
		wantOK(t, err, "LeaseReplayItemsWithin")
		if d := due.Sub(start.Add(st.due)); !slices.Equal(leaseSeqs(got), st.seqs) || wait != 0 || d < -time.Microsecond || d > time.Microsecond {
			t.Fatalf("lease %d: %v due +%s (wait %s), want %v due +%s", i, leaseSeqs(got), due.Sub(start), wait, st.seqs, st.due)
		}
	}
	got, _, wait, err := l.LeaseReplayItemsWithin(ctx, batch.ID, "engine-2", 4, time.Minute, 0, bs, ahead)
	wantOK(t, err, "LeaseReplayItemsWithin")
	if len(got) != 0 || wait < 99*time.Millisecond || wait > 101*time.Millisecond {
		t.Fatalf("nothing within ahead: leased %v, wait %s; want nothing for 100ms", leaseSeqs(got), wait)
	}
	// What was reserved ahead binds a taker that takes no ahead.
	clock.Add(550 * time.Millisecond)
	n, wait, err := s.TakeReplayTokens(ctx, bs[:1], 1)
	wantOK(t, err, "TakeReplayTokens")
	if n != 0 || wait < 49*time.Millisecond || wait > 51*time.Millisecond {
		t.Fatalf("at +0.55s: %d tokens, wait %s; want none until +0.6s", n, wait)
	}
	clock.Add(450 * time.Millisecond)
	n, _, err = s.TakeReplayTokens(ctx, bs[:1], 10)
	wantOK(t, err, "TakeReplayTokens")
	if n != 4 {
		t.Fatalf("at +1s: %d tokens, want the burst of 4 refilled since +0.6s", n)
	}
}

// testReplayTokensAheadWithinTheRate: takers reserving with random ahead
// and takers taking now, at random times, share one budget: the tokens,
// used when they are due, never exceed burst + rate × d in any interval
// d, and none is due later than its ahead.
func testReplayTokensAheadWithinTheRate(t *testing.T, h Harness) {
	s, clock, l, batch := leaseSetup(t, h, 4)
	ctx := t.Context()
	const rate, burst = 20, 4
	bs := []quarantine.RateBucket{{Key: "dest:z", Rate: rate, Burst: burst}}
	type use struct {
		at time.Time
		n  int
	}
	var uses []use
	rng := rand.New(rand.NewPCG(3, 4))
	start := clock.Now()
	for range 150 {
		clock.Add(time.Duration(rng.IntN(60)) * time.Millisecond)
		now := clock.Now()
		if rng.IntN(3) == 0 {
			n, _, err := s.TakeReplayTokens(ctx, bs, 1+rng.IntN(4))
			wantOK(t, err, "TakeReplayTokens")
			if n > 0 {
				uses = append(uses, use{now, n})
			}
			continue
		}
		ahead := time.Duration(rng.IntN(300)) * time.Millisecond
		got, due, _, err := l.LeaseReplayItemsWithin(ctx, batch.ID, "engine", 1+rng.IntN(4), time.Minute, 0, bs, ahead)
		wantOK(t, err, "LeaseReplayItemsWithin")
		if len(got) == 0 {
			continue
		}
		if d := due.Sub(now); d < -time.Microsecond || d > ahead+time.Microsecond {
			t.Fatalf("a lease at +%s with ahead %s is due at +%s", now.Sub(start), ahead, due.Sub(start))
		}
		uses = append(uses, use{due, len(got)})
		// Given back unpublished: the items are free again, the tokens
		// stay spent.
		wantOK(t, s.ReleaseReplayItems(ctx, got), "ReleaseReplayItems")
	}
	slices.SortStableFunc(uses, func(a, b use) int { return a.at.Compare(b.at) })
	total := 0
	for i := range uses {
		total += uses[i].n
		sum := 0
		for j := i; j < len(uses); j++ {
			sum += uses[j].n
			d := uses[j].at.Sub(uses[i].at).Seconds()
			if limit := burst + rate*d + 1e-6; float64(sum) > limit {
				t.Fatalf("%d tokens used in %.6fs, more than burst + rate × d = %.3f", sum, d, limit)
			}
		}
	}
	if span := clock.Now().Sub(start).Seconds(); float64(total) < rate*span/2 {
		t.Fatalf("only %d tokens in %.1fs at %d/s", total, span, rate)
	}
}

package storetest

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store"
)

func testReplayTokens(t *testing.T, h Harness) {
	runParallel(t, h, []subtest{
		{"Budget", testReplayTokenBudget},
		{"Shared", testReplayTokensShared},
		{"Hold", testReplayTokensHold},
		{"LeaseWithin", testReplayLeaseWithin},
		{"LeaseAhead", testReplayLeaseAhead},
		{"AheadWithinTheRate", testReplayTokensAheadWithinTheRate},
	})
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
	clock.Advance(wait)
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
		clock.Advance(time.Duration(rng.IntN(150)) * time.Millisecond)
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
	clock.Advance(time.Second)
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
	clock.Advance(29 * time.Second)
	if n, _, err = s.TakeReplayTokens(ctx, []quarantine.RateBucket{dest}, 5); err != nil || n != 0 {
		t.Fatalf("during the hold: %d tokens (%v), want 0", n, err)
	}
	clock.Advance(1500 * time.Millisecond) // 0.5s after the hold ended: 5 tokens at 10/s
	if n, _, err = s.TakeReplayTokens(ctx, []quarantine.RateBucket{dest}, 10); err != nil || n != 5 {
		t.Fatalf("after the hold: %d tokens (%v), want 5", n, err)
	}
	// A bucket not seen yet is held too.
	wantOK(t, s.HoldReplayTokens(ctx, "dest:new", clock.Now().Add(time.Minute)), "HoldReplayTokens")
	if n, _, err = s.TakeReplayTokens(ctx, []quarantine.RateBucket{{Key: "dest:new", Rate: 100, Burst: 100}}, 1); err != nil || n != 0 {
		t.Fatalf("a new bucket on hold gave %d (%v)", n, err)
	}
}

// leaseSetup opens a store with a clock of the test's and returns it with
// a batch of n new messages.
func leaseSetup(t *testing.T, h Harness, n int) (store.Store, *testClock, *quarantine.ReplayBatch) {
	t.Helper()
	s, clock := openClock(t, h)
	var msgs []*quarantine.Message
	for range n {
		msgs = append(msgs, newMsg())
	}
	insert(t, s, msgs...)
	return s, clock, createReplay(t, s, replayReq(ids(msgs)...), nil)
}

// near says whether a and b are within a microsecond (what the stores
// keep).
func near(a, b time.Time) bool {
	d := a.Sub(b)
	return d >= -time.Microsecond && d <= time.Microsecond
}

// testReplayLeaseWithin: a lease that takes its slots leases no more
// items than the buckets grant slots for (one per item, 1/rate apart, on
// the slowest bucket), from the schedule TakeReplaySlots shares, and
// leases nothing (with a wait) when no slot is free within ahead.
func testReplayLeaseWithin(t *testing.T, h Harness) {
	l, clock, batch := leaseSetup(t, h, 10)
	ctx := t.Context()
	bs := []quarantine.RateBucket{{Key: "dest:x", Rate: 2, Burst: 4}, {Key: "batch:" + batch.ID, Rate: 100, Burst: 100}}
	got, first, wait, err := l.LeaseReplayItemsWithin(ctx, batch.ID, "engine-1", 10, time.Minute, 0, bs, 0, 0)
	wantOK(t, err, "LeaseReplayItemsWithin")
	if !slices.Equal(leaseSeqs(got), []int{0}) || wait != 0 || got[0].Fence != 1 || got[0].Message == nil {
		t.Fatalf("first lease %v (wait %s), want one slot now: seq 0", leaseSeqs(got), wait)
	}
	if !near(first, clock.Now()) {
		t.Fatalf("an idle schedule with no lead: the first slot is %s after now, want now", first.Sub(clock.Now()))
	}
	got, _, wait, err = l.LeaseReplayItemsWithin(ctx, batch.ID, "engine-2", 10, time.Minute, 0, bs, 0, 0)
	wantOK(t, err, "LeaseReplayItemsWithin")
	if len(got) != 0 || wait < 499*time.Millisecond || wait > 501*time.Millisecond {
		t.Fatalf("with no slot free now: leased %v, wait %s; want nothing for 500ms", leaseSeqs(got), wait)
	}
	// The same schedule as TakeReplaySlots.
	clock.Advance(time.Second)
	n, first, _, err := l.TakeReplaySlots(ctx, bs[:1], 1, 0, 0)
	wantOK(t, err, "TakeReplaySlots")
	if n != 1 || !near(first, clock.Now()) {
		t.Fatalf("TakeReplaySlots after 1s gave %d from %s after now, want 1 now", n, first.Sub(clock.Now()))
	}
	got, first, _, err = l.LeaseReplayItemsWithin(ctx, batch.ID, "engine-2", 10, time.Minute, 0, bs, 0, time.Second)
	wantOK(t, err, "LeaseReplayItemsWithin")
	if !slices.Equal(leaseSeqs(got), []int{1, 2}) || !near(first, clock.Now().Add(500*time.Millisecond)) {
		t.Fatalf("after one slot taken elsewhere, 1s ahead: leased %v from +%s, want [1 2] from +500ms", leaseSeqs(got), first.Sub(clock.Now()))
	}
	// No free item: no slot is taken.
	got, _, _, err = l.LeaseReplayItemsWithin(ctx, batch.ID, "engine-2", 10, time.Minute, 2, bs, 0, 10*time.Second)
	wantOK(t, err, "LeaseReplayItemsWithin")
	if len(got) != 0 {
		t.Fatalf("past the canary bound: leased %v", leaseSeqs(got))
	}
	n, first, _, err = l.TakeReplaySlots(ctx, bs[:1], 1, 0, 10*time.Second)
	wantOK(t, err, "TakeReplaySlots")
	if n != 1 || !near(first, clock.Now().Add(1500*time.Millisecond)) {
		t.Fatalf("a lease of nothing took slots: the next is %s after now, want 1.5s", first.Sub(clock.Now()))
	}
	_, _, _, err = l.LeaseReplayItemsWithin(ctx, batch.ID, "engine-2", 1, time.Minute, 0, []quarantine.RateBucket{{Key: "k"}}, 0, 0)
	wantCode(t, err, quarantine.EINVALID)
	_, _, _, err = l.TakeReplaySlots(ctx, []quarantine.RateBucket{{Key: "k", Rate: -1}}, 1, 0, 0)
	wantCode(t, err, quarantine.EINVALID)
}

// testReplayLeaseAhead: a lease takes slots up to ahead after now, the
// next ones where the schedule left off; an idle schedule starts lead
// after now; every other taker comes after.
func testReplayLeaseAhead(t *testing.T, h Harness) {
	l, clock, batch := leaseSetup(t, h, 12)
	ctx := t.Context()
	bs := []quarantine.RateBucket{{Key: "dest:y", Rate: 10, Burst: 4}, {Key: "batch:" + batch.ID, Rate: 100, Burst: 100}}
	start := clock.Now()
	ahead := 500 * time.Millisecond
	steps := []struct {
		seqs  []int
		first time.Duration // after start
	}{
		{[]int{0, 1, 2, 3}, 0},                // slots at 0, 0.1, 0.2, 0.3 s
		{[]int{4, 5}, 400 * time.Millisecond}, // 0.4, 0.5: within ahead
	}
	for i, st := range steps {
		got, first, wait, err := l.LeaseReplayItemsWithin(ctx, batch.ID, "engine-1", 4, time.Minute, 0, bs, 0, ahead)
		wantOK(t, err, "LeaseReplayItemsWithin")
		if !slices.Equal(leaseSeqs(got), st.seqs) || wait != 0 || !near(first, start.Add(st.first)) {
			t.Fatalf("lease %d: %v from +%s (wait %s), want %v from +%s", i, leaseSeqs(got), first.Sub(start), wait, st.seqs, st.first)
		}
	}
	got, _, wait, err := l.LeaseReplayItemsWithin(ctx, batch.ID, "engine-2", 4, time.Minute, 0, bs, 0, ahead)
	wantOK(t, err, "LeaseReplayItemsWithin")
	if len(got) != 0 || wait < 99*time.Millisecond || wait > 101*time.Millisecond {
		t.Fatalf("nothing within ahead: leased %v, wait %s; want nothing for 100ms", leaseSeqs(got), wait)
	}
	// Idle again (the last slot, +0.5 s, passed): the next grant starts
	// lead after now.
	clock.Advance(2 * time.Second)
	got, first, _, err := l.LeaseReplayItemsWithin(ctx, batch.ID, "engine-2", 4, time.Minute, 0, bs, 50*time.Millisecond, ahead)
	wantOK(t, err, "LeaseReplayItemsWithin")
	if !slices.Equal(leaseSeqs(got), []int{6, 7, 8, 9}) || !near(first, clock.Now().Add(50*time.Millisecond)) {
		t.Fatalf("an idle schedule with lead 50ms: leased %v from +%s, want [6 7 8 9] from +50ms", leaseSeqs(got), first.Sub(clock.Now()))
	}
	// What was leased ahead binds a taker that takes none ahead.
	n, _, wait, err := l.TakeReplaySlots(ctx, bs[:1], 1, 0, 0)
	wantOK(t, err, "TakeReplaySlots")
	if n != 0 || wait < 449*time.Millisecond || wait > 451*time.Millisecond {
		t.Fatalf("after the lease: %d slots, wait %s; want none until +450ms", n, wait)
	}
}

// testReplayTokensAheadWithinTheRate: leases and takes of slots with
// random leads and aheads, at random times, share one schedule: its
// slots are never closer than 1/rate (so at most 1 + rate × d fall in
// any interval d), none is before its take or after its ahead, and a
// schedule kept busy loses little.
func testReplayTokensAheadWithinTheRate(t *testing.T, h Harness) {
	l, clock, batch := leaseSetup(t, h, 4)
	ctx := t.Context()
	const rate = 20
	bs := []quarantine.RateBucket{{Key: "dest:z", Rate: rate, Burst: 4}}
	var slots []time.Time
	rng := rand.New(rand.NewPCG(3, 4))
	start := clock.Now()
	for range 150 {
		clock.Advance(time.Duration(rng.IntN(60)) * time.Millisecond)
		now := clock.Now()
		lead := time.Duration(rng.IntN(50)) * time.Millisecond
		ahead := time.Duration(rng.IntN(300)) * time.Millisecond
		var n int
		var first time.Time
		if rng.IntN(3) == 0 {
			var err error
			n, first, _, err = l.TakeReplaySlots(ctx, bs, 1+rng.IntN(4), lead, ahead)
			wantOK(t, err, "TakeReplaySlots")
		} else {
			got, f, _, err := l.LeaseReplayItemsWithin(ctx, batch.ID, "engine", 1+rng.IntN(4), time.Minute, 0, bs, lead, ahead)
			wantOK(t, err, "LeaseReplayItemsWithin")
			n, first = len(got), f
			// Given back unpublished: the items are free again, the
			// slots stay spent.
			if n > 0 {
				wantOK(t, l.ReleaseReplayItems(ctx, got), "ReleaseReplayItems")
			}
		}
		for k := range n {
			at := first.Add(time.Duration(float64(k) / rate * float64(time.Second)))
			if at.Before(now.Add(-time.Microsecond)) || at.After(now.Add(max(lead, ahead)+time.Microsecond)) {
				t.Fatalf("a take at +%s with lead %s, ahead %s has a slot at +%s", now.Sub(start), lead, ahead, at.Sub(start))
			}
			slots = append(slots, at)
		}
	}
	slices.SortFunc(slots, func(a, b time.Time) int { return a.Compare(b) })
	for i := 1; i < len(slots); i++ {
		if d := slots[i].Sub(slots[i-1]); d < time.Second/rate-time.Microsecond {
			t.Fatalf("slots %d and %d are %s apart, less than 1/rate", i-1, i, d)
		}
	}
	if span := clock.Now().Sub(start).Seconds(); float64(len(slots)) < rate*span/2 {
		t.Fatalf("only %d slots in %.1fs at %d/s", len(slots), span, rate)
	}
}

package storetest

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
)

func testReplayTokens(t *testing.T, h Harness) {
	t.Run("Budget", func(t *testing.T) { t.Parallel(); testReplayTokenBudget(t, h) })
	t.Run("Shared", func(t *testing.T) { t.Parallel(); testReplayTokensShared(t, h) })
	t.Run("Hold", func(t *testing.T) { t.Parallel(); testReplayTokensHold(t, h) })
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

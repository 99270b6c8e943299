package replays

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// Whatever the engines' clocks, leads, horizons and wants, the slots
// granted from one bucket are never closer than 1/rate, none is before
// the clock of its grant or after its horizon.
func TestSlotsNeverCloser(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		rate := []float64{3, 40, 200, 1000, 1e4, 1e6}[rng.IntN(6)]
		bs := []quarantine.RateBucket{{Key: "batch", Rate: rate, Burst: 20}, {Key: "dest", Rate: rate * (1 + rng.Float64()), Burst: 1}}
		levels := []Level{Full(bs[0], t0), Full(bs[1], t0)}
		var slots []time.Time
		clock := t0
		for range 300 {
			clock = clock.Add(time.Duration(rng.Int64N(int64(20 * time.Millisecond))))
			// Another engine's clock, up to 5 ms off.
			now := clock.Add(time.Duration(rng.Int64N(int64(10*time.Millisecond))) - 5*time.Millisecond)
			lead := time.Duration(rng.Int64N(int64(30 * time.Millisecond)))
			ahead := time.Duration(rng.Int64N(int64(300 * time.Millisecond)))
			n, first, wait, next := Slots(bs, levels, 1+rng.IntN(50), now, lead, ahead)
			if n == 0 {
				if wait <= 0 || next != nil {
					t.Fatalf("seed %d: nothing granted, wait %s, next %v", seed, wait, next)
				}
				continue
			}
			prev := ceilTime(nextSlot(bs[0], levels[0]))
			if p := ceilTime(nextSlot(bs[1], levels[1])); p.After(prev) {
				prev = p
			}
			levels = next
			for k := range n {
				s := SlotTime(first, rate, k)
				if s.Before(now) || s.After(now.Add(max(ahead, lead))) {
					t.Fatalf("seed %d: slot %s outside [now, now+ahead] = [%s, %s]", seed, s, now, now.Add(max(ahead, lead)))
				}
				if k == 0 && s.Before(now.Add(lead)) && !s.Equal(prev) {
					t.Fatalf("seed %d: an idle schedule starts at %s, before now+lead %s", seed, s, now.Add(lead))
				}
				slots = append(slots, s)
			}
		}
		slices.SortFunc(slots, func(a, b time.Time) int { return a.Compare(b) })
		gap := time.Duration(float64(time.Second) / rate)
		for i := 1; i < len(slots); i++ {
			if d := slots[i].Sub(slots[i-1]); d < gap-time.Nanosecond {
				t.Fatalf("seed %d, rate %g: slots %d and %d are %s apart, less than 1/rate = %s", seed, rate, i-1, i, d, gap)
			}
		}
	}
}

// A schedule kept busy (grants asked before their slots) hands out
// consecutive slots, exactly 1/rate apart: it loses no time.
func TestSlotsFollowEachOther(t *testing.T) {
	t.Parallel()
	bs := []quarantine.RateBucket{{Key: "k", Rate: 200, Burst: 20}}
	levels := []Level{Full(bs[0], t0)}
	now := t0
	var last time.Time
	total := 0
	for total < 2000 {
		n, first, wait, next := Slots(bs, levels, 10, now, 5*time.Millisecond, 200*time.Millisecond)
		if n == 0 {
			now = now.Add(wait)
			continue
		}
		if want := last.Add(5 * time.Millisecond); !last.IsZero() && !first.Equal(want) {
			t.Fatalf("grant after %d slots starts at %s, want %s", total, first.Sub(t0), want.Sub(t0))
		}
		levels, total = next, total+n
		last = SlotTime(first, 200, n-1)
		now = now.Add(time.Duration(n) * 5 * time.Millisecond / 2) // leases twice as fast as the rate
	}
	if want := t0.Add(5*time.Millisecond + time.Duration(total-1)*5*time.Millisecond); !last.Equal(want) {
		t.Errorf("the %dth slot is at %s, want %s", total, last.Sub(t0), want.Sub(t0))
	}
}

// A held bucket (HoldReplayTokens: tokens at most 0, stamped at the end
// of the hold) has no slot before the hold ends.
func TestSlotsAfterHold(t *testing.T) {
	t.Parallel()
	bs := []quarantine.RateBucket{{Key: "k", Rate: 10, Burst: 5}}
	until := t0.Add(time.Second)
	n, _, wait, _ := Slots(bs, []Level{{Tokens: 0, At: until}}, 5, t0, 0, 200*time.Millisecond)
	if n != 0 || wait != 900*time.Millisecond {
		t.Fatalf("held: %d slots, wait %s; want none, 900ms", n, wait)
	}
	n, first, _, _ := Slots(bs, []Level{{Tokens: 0, At: until}}, 5, until, 0, 200*time.Millisecond)
	if n != 2 || !first.Equal(until.Add(100*time.Millisecond)) {
		t.Fatalf("after the hold: %d slots from %s; want 2 from %s", n, first, until.Add(100*time.Millisecond))
	}
}

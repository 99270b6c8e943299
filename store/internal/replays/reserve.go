package replays

import (
	"math"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// Slots grants up to want publish slots from every bucket of bs at once,
// which held levels[i] each, at now: one slot per item, the first at
// first, each next one 1/r later (r: the lowest rate of bs), the items to
// be published not before their slot. It is the replay engine's shared
// schedule: however many engines take slots, and whenever, the slots of
// one bucket are never closer than 1/rate, so that any interval of
// length d holds at most 1 + rate × d of them (TestSlotsNeverCloser). A
// bucket's burst is not drawn on: the engine keeps it for lateness (an
// item may be published a little after its slot, never before).
//
// A bucket's state is the time of its next free slot, stored as a Level
// of a bucket whose capacity is one token (At + (1 - Tokens)/rate), never
// before now: a schedule left idle starts again from now, it does not
// catch up. The first slot of an idle schedule is lead after now (the
// time the caller needs before it can publish: its transaction's commit
// and the read of its messages); one still going on goes on from its
// next free slot. Every slot is at most ahead after now (ahead is raised
// to lead): a grant is made ahead of its slots so that the caller's
// round trips overlap the wait. Slots granted and not used (a
// pause, a crash, an item published too late and given a new slot) are
// lost, never given back: they can only slow the schedule down.
//
// It returns n, 0 when no slot is free within ahead, with wait: how long
// until one is; next is every bucket's level after the grant (nil when n
// is 0: nothing changes).
func Slots(bs []quarantine.RateBucket, levels []Level, want int, now time.Time, lead, ahead time.Duration) (n int, first time.Time, wait time.Duration, next []Level) {
	if want <= 0 || len(bs) == 0 {
		return 0, time.Time{}, 0, nil
	}
	lead = max(lead, 0)
	ahead = max(ahead, lead)
	horizon := now.Add(ahead)
	rmin := math.Inf(1)
	for i, b := range bs {
		if f := nextSlot(b, levels[i]); f.After(first) {
			first = f
		}
		rmin = math.Min(rmin, b.Rate)
	}
	if first.Before(now) {
		// Idle: start again lead from now. A schedule still going on
		// goes on, even within lead (its first items may be published a
		// little late, never early): a gap would be lost for good.
		first = now.Add(lead)
	}
	first = ceilTime(first)
	if first.After(horizon) {
		return 0, time.Time{}, max(time.Microsecond, ceilMicro(first.Sub(horizon))), nil
	}
	// Every slot within the horizon: first + (n-1)/rmin <= horizon.
	n = min(want, 1+int(math.Floor(horizon.Sub(first).Seconds()*rmin+1e-9)))
	last := first.Add(seconds(float64(n-1) / rmin))
	next = make([]Level, len(bs))
	for i, b := range bs {
		free := ceilTime(last.Add(seconds(1 / b.Rate)))
		stamp := now
		if levels[i].At.After(stamp) {
			stamp = levels[i].At
		}
		stamp = stamp.Truncate(time.Microsecond)
		next[i] = Level{Tokens: 1 - free.Sub(stamp).Seconds()*b.Rate, At: stamp}
	}
	return n, first, 0, next
}

// SlotTime is the slot of the k-th item (from 0) of a grant of Slots
// whose first slot is first, on buckets whose lowest rate is rate.
func SlotTime(first time.Time, rate float64, k int) time.Time {
	return first.Add(seconds(float64(k) / rate))
}

// nextSlot is the next free slot of b at level l (see Slots).
func nextSlot(b quarantine.RateBucket, l Level) time.Time {
	return l.At.Add(seconds((1 - l.Tokens) / b.Rate))
}

// Reserver grants from buckets at their levels at now: Reserve (tokens)
// or Slots (the engine's schedule). Each store's take of tokens reads and
// writes the levels around it.
type Reserver func(bs []quarantine.RateBucket, levels []Level, now time.Time) (n int, due time.Time, wait time.Duration, next []Level)

// ReserveTokens reserves up to want tokens, due at most ahead later.
func ReserveTokens(want int, ahead time.Duration) Reserver {
	return func(bs []quarantine.RateBucket, levels []Level, now time.Time) (int, time.Time, time.Duration, []Level) {
		return Reserve(bs, levels, want, now, ahead)
	}
}

// ReserveSlots grants up to want slots, the first lead after now at the
// earliest, every one within ahead.
func ReserveSlots(want int, lead, ahead time.Duration) Reserver {
	return func(bs []quarantine.RateBucket, levels []Level, now time.Time) (int, time.Time, time.Duration, []Level) {
		return Slots(bs, levels, want, now, lead, ahead)
	}
}

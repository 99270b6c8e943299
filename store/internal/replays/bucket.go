package replays

import (
	"math"
	"slices"
	"strings"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// Buckets validates bs and returns them sorted by key (the order every
// store locks them in), one per key: the first of duplicates wins.
func Buckets(bs []quarantine.RateBucket) ([]quarantine.RateBucket, error) {
	out := make([]quarantine.RateBucket, 0, len(bs))
	for _, b := range bs {
		if b.Key == "" || math.IsNaN(b.Rate) || math.IsInf(b.Rate, 0) || b.Rate <= 0 {
			return nil, quarantine.Errorf(quarantine.EINVALID, "a rate bucket needs a key and a positive rate")
		}
		if !slices.ContainsFunc(out, func(o quarantine.RateBucket) bool { return o.Key == b.Key }) {
			out = append(out, b)
		}
	}
	slices.SortFunc(out, func(a, b quarantine.RateBucket) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// Capacity is the most tokens b holds: its burst, at least 1.
func Capacity(b quarantine.RateBucket) float64 { return float64(max(1, b.Burst)) }

// Level is a bucket's stored state: it held Tokens at At. Tokens may be
// negative (tokens reserved ahead of the refill, see Reserve) and At may
// be later than a reader's clock (a hold, or another engine's clock
// ahead): the bucket refills at its rate from At on, never before, up to
// its capacity.
type Level struct {
	Tokens float64
	At     time.Time
}

// Full returns a new bucket's level at now.
func Full(b quarantine.RateBucket, now time.Time) Level {
	return Level{Tokens: Capacity(b), At: now.Truncate(time.Microsecond)}
}

// fullAt is when b, at level l, is full again, seen at now: never before
// now (a full bucket is full from now on).
func fullAt(b quarantine.RateBucket, l Level, now time.Time) time.Time {
	f := l.At.Add(seconds(math.Max(0, Capacity(b)-l.Tokens) / b.Rate))
	if f.Before(now) {
		return now
	}
	return f
}

// Reserve grants up to want tokens from every bucket of bs at once (the
// same number from each), which held levels[i] each, at now, to be used
// at one time: at, the earliest time at which every bucket holds them all
// after every grant before it. at is at most ahead after now: a grant may
// draw a bucket ahead of its refill by up to ahead × rate tokens (the
// stored level goes negative), so that the caller's round trips overlap
// the wait for the tokens, and uses them at at. With ahead 0 a grant takes
// what is there now (at is now).
//
// Whatever the times grants are asked at and whatever their ahead, the
// grants of one bucket used at their at never exceed, in any interval of
// length d, the bucket's capacity plus rate × d (the bucket's state is
// the time it is full again, moved past every grant's at; a grant
// limited by another bucket is charged at its own, later, time). A grant
// not used (a pause, a crash) is lost, never given back: it can only
// slow later grants down.
//
// It returns n, 0 when nothing can be reserved yet, with wait: how long
// until one token can; next is every bucket's level after the grant (nil
// when n is 0: nothing changes).
func Reserve(bs []quarantine.RateBucket, levels []Level, want int, now time.Time, ahead time.Duration) (n int, at time.Time, wait time.Duration, next []Level) {
	if want <= 0 || len(bs) == 0 {
		return 0, time.Time{}, 0, nil
	}
	ahead = max(ahead, 0)
	horizon := now.Add(ahead)
	full := make([]time.Time, len(bs))
	n = want
	for i, b := range bs {
		full[i] = fullAt(b, levels[i], now)
		// n tokens are there at horizon when full - (capacity-n)/rate <= horizon.
		room := horizon.Sub(full[i]).Seconds()*b.Rate + Capacity(b)
		n = min(n, int(math.Floor(room+1e-9)), int(Capacity(b)))
	}
	if n <= 0 {
		var latest time.Time
		for i, b := range bs {
			if t := full[i].Add(-seconds((Capacity(b) - 1) / b.Rate)); t.After(latest) {
				latest = t
			}
		}
		return 0, time.Time{}, max(time.Microsecond, ceilMicro(latest.Sub(horizon))), nil
	}
	at = now
	for i, b := range bs {
		if t := full[i].Add(-seconds((Capacity(b) - float64(n)) / b.Rate)); t.After(at) {
			at = t
		}
	}
	at = ceilTime(at)
	next = make([]Level, len(bs))
	for i, b := range bs {
		after := full[i]
		if at.After(after) {
			after = at
		}
		after = after.Add(seconds(float64(n) / b.Rate))
		// Stored from now on (or from a later stamp: never refill twice),
		// with as many tokens as make it full again at after.
		stamp := now
		if levels[i].At.After(stamp) {
			stamp = levels[i].At
		}
		stamp = stamp.Truncate(time.Microsecond)
		next[i] = Level{Tokens: Capacity(b) - after.Sub(stamp).Seconds()*b.Rate, At: stamp}
	}
	return n, at, 0, next
}

// seconds converts s seconds to a duration (nanoseconds, rounded).
func seconds(s float64) time.Duration { return time.Duration(math.Round(s * 1e9)) }

// ceilMicro rounds d up to a microsecond.
func ceilMicro(d time.Duration) time.Duration {
	if r := d % time.Microsecond; r > 0 {
		d += time.Microsecond - r
	}
	return d
}

// ceilTime rounds t up to a microsecond (what the stores keep).
func ceilTime(t time.Time) time.Time {
	if u := t.Truncate(time.Microsecond); u.Before(t) {
		return u.Add(time.Microsecond)
	}
	return t
}

// LeaseWithin starts a store's LeaseReplayItemsWithin: EINVALID for an
// empty owner or a bad bucket; the buckets (Buckets), and whether to
// lease at all (n above 0 and a batch id that can name a batch: nothing
// leased, no error, otherwise).
func LeaseWithin(batchID, owner string, n int, buckets []quarantine.RateBucket) ([]quarantine.RateBucket, bool, error) {
	if owner == "" {
		return nil, false, quarantine.Errorf(quarantine.EINVALID, "a lease needs an owner")
	}
	bs, err := Buckets(buckets)
	if err != nil {
		return nil, false, err
	}
	return bs, n > 0 && quarantine.ValidID(batchID), nil
}

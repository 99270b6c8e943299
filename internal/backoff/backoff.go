// Package backoff is the service's one exponential backoff: the ceiling
// of the n-th wait, and the two jitters its users draw under it.
package backoff

import (
	"context"
	"math"
	"math/rand/v2"
	"time"
)

const maxDuration = time.Duration(math.MaxInt64)

// Ceiling is the n-th wait (1-based; n < 1 counts as 1) before jitter:
// initial multiplied by mult n-1 times, at most limit (no limit when
// limit <= 0), saturating instead of overflowing. A zero initial is zero.
func Ceiling(n int, initial time.Duration, mult float64, limit time.Duration) time.Duration {
	if initial <= 0 {
		return 0
	}
	c := float64(initial) * math.Pow(mult, float64(max(n, 1)-1))
	d := maxDuration
	if c < float64(maxDuration) { // float64(maxDuration) rounds up: >= overflows
		d = time.Duration(c)
	}
	if limit > 0 && d > limit {
		d = limit
	}
	return d
}

// Full is a random wait between 0 and the ceiling ("full jitter"):
// clients retrying the same failure spread over the whole interval.
func Full(n int, initial time.Duration, mult float64, limit time.Duration) time.Duration {
	c := Ceiling(n, initial, mult, limit)
	if c <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(c) + 1))
}

// Equal is a random wait between half the ceiling and all of it ("equal
// jitter"): never much shorter than the ceiling, still out of step.
func Equal(n int, initial time.Duration, mult float64, limit time.Duration) time.Duration {
	c := Ceiling(n, initial, mult, limit)
	half := c / 2
	return half + time.Duration(rand.Int64N(int64(c-half)+1))
}

// Sleep waits d, or until ctx ends: false then. A wait of d <= 0 returns
// at once, true unless ctx has ended.
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

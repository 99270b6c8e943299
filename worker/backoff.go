package worker

import (
	"math"
	"math/rand/v2"
	"time"
)

// Policy gives the delay before the next attempt after attempt (1-based:
// 1 is the first attempt) failed.
type Policy interface {
	Delay(attempt int) time.Duration
}

// expBackoff is exponential backoff with full jitter.
type expBackoff struct {
	initial, max time.Duration
	mult         float64
}

// Backoff returns exponential backoff with full jitter: after attempt n
// fails, the delay is uniform in [0, min(max, initial·multiplier^(n-1))].
// A multiplier below 1, or NaN, becomes 1 (a constant ceiling); a zero max
// removes the cap; a negative initial becomes zero.
func Backoff(initial time.Duration, multiplier float64, maxDelay time.Duration) Policy {
	if math.IsNaN(multiplier) || multiplier < 1 {
		multiplier = 1
	}
	return &expBackoff{initial: max(initial, 0), max: maxDelay, mult: multiplier}
}

// ceiling is the largest delay after attempt n fails.
func (b *expBackoff) ceiling(n int) time.Duration {
	if b.initial == 0 {
		return 0
	}
	c := float64(b.initial) * math.Pow(b.mult, float64(max(n, 1)-1))
	d := maxDuration
	if c < float64(maxDuration) { // float64(maxDuration) rounds up: >= overflows
		d = time.Duration(c)
	}
	if b.max > 0 && d > b.max {
		d = b.max
	}
	return d
}

// Delay implements Policy.
func (b *expBackoff) Delay(attempt int) time.Duration {
	c := b.ceiling(attempt)
	if c <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(c) + 1))
}

// BackoffFunc adapts f (attempt -> delay) to a Policy. A negative result
// becomes zero.
type BackoffFunc func(attempt int) time.Duration

// Delay implements Policy.
func (f BackoffFunc) Delay(attempt int) time.Duration { return max(f(attempt), 0) }

// maxPolicyDelay is the largest delay p can give for attempts up to
// maxAttempts-1 (the attempts after which a retry happens). It samples a
// BackoffFunc (up to 1000 attempts when there is no cap) and reports
// unbounded for a Backoff without max and without cap.
func maxPolicyDelay(p Policy, maxAttempts int) (d time.Duration, unbounded bool) {
	last := maxAttempts - 1
	if maxAttempts == 0 {
		last = 1000
	}
	switch b := p.(type) {
	case *expBackoff:
		if maxAttempts == 0 && b.max == 0 && b.mult > 1 && b.initial > 0 {
			return 0, true
		}
		return b.ceiling(max(last, 1)), false
	default:
		for n := 1; n <= last; n++ {
			d = max(d, p.Delay(n))
		}
		return d, false
	}
}

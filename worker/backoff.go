package worker

import (
	"fmt"
	"math"
	"time"

	"github.com/quarantine-dev/quarantine/internal/backoff"
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
	invalid      error // a negative argument: Register refuses the job
}

// Backoff returns exponential backoff with full jitter: after attempt n
// fails, the delay is uniform in [0, min(max, initial·multiplier^(n-1))].
// A multiplier below 1, or NaN, becomes 1 (a constant ceiling); a zero max
// removes the cap. A negative initial or max is an error: Job.Validate
// (so Register) refuses a job with such a backoff, and until then it
// behaves as zero (no delay, no cap).
func Backoff(initial time.Duration, multiplier float64, maxDelay time.Duration) Policy {
	if math.IsNaN(multiplier) || multiplier < 1 {
		multiplier = 1
	}
	b := &expBackoff{initial: max(initial, 0), max: max(maxDelay, 0), mult: multiplier}
	switch {
	case initial < 0:
		b.invalid = fmt.Errorf("the backoff's initial delay %s is negative", initial)
	case maxDelay < 0:
		b.invalid = fmt.Errorf("the backoff's max %s is negative (0 means no max)", maxDelay)
	}
	return b
}

func (b *expBackoff) validate() error { return b.invalid }

// ceiling is the largest delay after attempt n fails.
func (b *expBackoff) ceiling(n int) time.Duration {
	return backoff.Ceiling(n, b.initial, b.mult, b.max)
}

// Delay implements Policy.
func (b *expBackoff) Delay(attempt int) time.Duration {
	return backoff.Full(attempt, b.initial, b.mult, b.max)
}

// BackoffFunc adapts f (attempt -> delay) to a Policy. A negative result
// becomes zero. A nil BackoffFunc is refused by Job.Validate (and
// Register); its Delay is zero.
type BackoffFunc func(attempt int) time.Duration

// Delay implements Policy.
func (f BackoffFunc) Delay(attempt int) time.Duration {
	if f == nil {
		return 0
	}
	return max(f(attempt), 0)
}

func (f BackoffFunc) validate() error {
	if f == nil {
		return fmt.Errorf("the backoff is a nil BackoffFunc")
	}
	return nil
}

// validatePolicy reports a policy that cannot work (a nil BackoffFunc,
// negative Backoff durations).
func validatePolicy(p Policy) error {
	if v, ok := p.(interface{ validate() error }); ok {
		return v.validate()
	}
	return nil
}

// safeDelay calls p.Delay(n), turning a panic into an error: a Policy is
// user code, and the worker calls it outside the handler's recovery.
func safeDelay(p Policy, n int) (d time.Duration, err error) {
	defer func() {
		if r := recover(); r != nil {
			d, err = 0, fmt.Errorf("the backoff policy panicked for attempt %d: %v", n, r)
		}
	}()
	return max(p.Delay(n), 0), nil
}

// maxPolicyDelay is the largest delay p can give for attempts up to
// maxAttempts-1 (the attempts after which a retry happens). It samples a
// BackoffFunc (up to 1000 attempts when there is no cap) and reports
// unbounded for a Backoff without max and without cap; err when the
// policy panicked.
func maxPolicyDelay(p Policy, maxAttempts int) (d time.Duration, unbounded bool, err error) {
	last := maxAttempts - 1
	if maxAttempts == 0 {
		last = 1000
	}
	switch b := p.(type) {
	case *expBackoff:
		if maxAttempts == 0 && b.max == 0 && b.mult > 1 && b.initial > 0 {
			return 0, true, nil
		}
		return b.ceiling(max(last, 1)), false, nil
	default:
		for n := 1; n <= last; n++ {
			dn, err := safeDelay(p, n)
			if err != nil {
				return 0, false, err
			}
			d = max(d, dn)
		}
		return d, false, nil
	}
}

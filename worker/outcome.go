package worker

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ErrPermanent matches, under errors.Is, every error made by Permanent.
var ErrPermanent = errors.New("permanent failure")

// ErrClaimLost is returned by Claims.Extend, Complete and Release when the
// owner token no longer holds the key: the lease expired and another
// worker took it over, or the key was settled already.
var ErrClaimLost = errors.New("claim lost: the key is not held by this owner")

// ErrUnknownJob is the error recorded when a delivery names no registered
// job.
var ErrUnknownJob = errors.New("no job registered under this name")

// ErrMalformed matches, under errors.Is, a payload the job cannot decode
// (see JSON): the delivery is dead-lettered at once with class malformed.
var ErrMalformed = errors.New("malformed payload")

// permanentError marks an error that must not be retried.
type permanentError struct{ err error }

func (e *permanentError) Error() string {
	if e.err == nil {
		return ErrPermanent.Error()
	}
	return e.err.Error()
}
func (e *permanentError) Unwrap() []error { return []error{e.err, ErrPermanent} }

// Permanent wraps err so that the worker dead-letters the delivery at once
// (class permanent), without retrying. errors.Is(Permanent(err),
// ErrPermanent) is true, and err stays reachable through errors.Is/As.
func Permanent(err error) error { return &permanentError{err: err} }

// retryAfterError asks for a specific delay before the next attempt.
type retryAfterError struct {
	err   error
	delay time.Duration
}

func (e *retryAfterError) Error() string {
	msg := "retry requested"
	if e.err != nil {
		msg = e.err.Error()
	}
	return fmt.Sprintf("%s (retry after %s)", msg, e.delay)
}
func (e *retryAfterError) Unwrap() error { return e.err }

// RetryAfter wraps err so that the next attempt waits d instead of the
// job's backoff. A negative d becomes zero. The attempt cap still applies:
// at the cap the delivery is dead-lettered as exhausted.
func RetryAfter(err error, d time.Duration) error {
	return &retryAfterError{err: err, delay: max(d, 0)}
}

// rejectError hands the delivery back to the backend's rejection policy.
type rejectError struct{ err error }

func (e *rejectError) Error() string {
	if e.err == nil {
		return "rejected"
	}
	return "rejected: " + e.err.Error()
}
func (e *rejectError) Unwrap() error { return e.err }

// Reject wraps err so that the worker rejects the delivery (Driver.Reject)
// and leaves what happens next to the backend's rejection policy: a
// RabbitMQ dead-letter exchange, an SQS redrive policy, a NATS Term. The
// worker writes no failure envelope for it.
func Reject(err error) error { return &rejectError{err: err} }

// RetryAfterResponse turns an HTTP 429 or 503 answer into a RetryAfter
// error, reading its Retry-After header as delay-seconds or an HTTP-date
// (relative to now). It returns nil for any other status. A missing or
// unreadable header gives fallback. err is what the returned error wraps;
// when nil it says the status.
func RetryAfterResponse(resp *http.Response, now time.Time, fallback time.Duration, err error) error {
	if resp == nil || (resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable) {
		return nil
	}
	if err == nil {
		err = fmt.Errorf("HTTP %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	}
	d, ok := ParseRetryAfter(resp.Header.Get("Retry-After"), now)
	if !ok {
		d = fallback
	}
	return RetryAfter(err, d)
}

// ParseRetryAfter reads an HTTP Retry-After value (RFC 9110 §10.2.3):
// delay-seconds, or an HTTP-date turned into the time left after now (a
// date in the past gives zero). ok is false when v is neither.
func ParseRetryAfter(v string, now time.Time) (d time.Duration, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0, false
		}
		if n > int64(maxDuration/time.Second) {
			return maxDuration, true
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}

const maxDuration = time.Duration(1<<63 - 1)

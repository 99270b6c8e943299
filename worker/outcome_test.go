package worker_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine/worker"
)

func TestPermanentMatchesErrPermanentAndKeepsCause(t *testing.T) {
	t.Parallel()
	err := worker.Permanent(fmt.Errorf("card declined: %w", errBoom))
	if !errors.Is(err, worker.ErrPermanent) || !errors.Is(err, errBoom) {
		t.Fatalf("errors.Is: permanent %v, cause %v", errors.Is(err, worker.ErrPermanent), errors.Is(err, errBoom))
	}
	if err.Error() != "card declined: boom" {
		t.Fatalf("message %q", err)
	}
	if errors.Is(worker.RetryAfter(errBoom, time.Second), worker.ErrPermanent) {
		t.Fatal("RetryAfter matches ErrPermanent")
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"30", 30 * time.Second, true},
		{" 0 ", 0, true},
		{"Sun, 01 Mar 2026 12:01:30 GMT", 90 * time.Second, true},
		{"Sunday, 01-Mar-26 12:00:10 GMT", 10 * time.Second, true}, // RFC 850
		{"Sun Mar  1 12:00:05 2026", 5 * time.Second, true},        // asctime
		{"Sun, 01 Mar 2026 11:00:00 GMT", 0, true},                 // in the past
		{"-5", 0, false},
		{"soon", 0, false},
		{"", 0, false},
		{"99999999999999999999", 0, false},
	}
	for _, c := range cases {
		got, ok := worker.ParseRetryAfter(c.in, now)
		if got != c.want || ok != c.ok {
			t.Errorf("ParseRetryAfter(%q) = %s, %v; want %s, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func TestRetryAfterResponse(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	resp := func(code int, ra string) *http.Response {
		r := &http.Response{StatusCode: code, Header: http.Header{}}
		if ra != "" {
			r.Header.Set("Retry-After", ra)
		}
		return r
	}
	for _, c := range []struct {
		resp  *http.Response
		delay time.Duration // -1: nil error
	}{
		{resp(429, "30"), 30 * time.Second},
		{resp(503, "Sun, 01 Mar 2026 12:00:45 GMT"), 45 * time.Second},
		{resp(503, "garbage"), 7 * time.Second}, // the fallback
		{resp(429, ""), 7 * time.Second},
		{resp(500, "30"), -1},
		{resp(200, ""), -1},
		{nil, -1},
	} {
		err := worker.RetryAfterResponse(c.resp, now, 7*time.Second, nil)
		if c.delay < 0 {
			if err != nil {
				t.Errorf("%v: got %v, want nil", c.resp, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("retry after %s", c.delay)) {
			t.Errorf("status %d: got %v, want a retry after %s", c.resp.StatusCode, err, c.delay)
		}
	}
}

func TestBackoffFullJitterWithinCeiling(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		b          worker.Policy
		attempt    int
		wantCeil   time.Duration
		wantPinned bool // the ceiling is reached at least once
	}{
		{"grows", worker.Backoff(time.Second, 2, 0), 4, 8 * time.Second, true},
		{"capped", worker.Backoff(time.Second, 2, 3*time.Second), 10, 3 * time.Second, true},
		{"multiplier below 1 is 1", worker.Backoff(time.Second, 0.5, 0), 6, time.Second, true},
		{"NaN multiplier is 1", worker.Backoff(time.Second, math.NaN(), 0), 6, time.Second, true},
		{"zero max: no cap", worker.Backoff(time.Millisecond, 10, 0), 5, 10 * time.Second, false},
		{"func", worker.BackoffFunc(func(n int) time.Duration { return time.Duration(n) * time.Minute }), 3, 3 * time.Minute, true},
		{"negative func is zero", worker.BackoffFunc(func(int) time.Duration { return -time.Second }), 1, 0, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var top, low time.Duration = 0, math.MaxInt64
			for range 2000 {
				d := c.b.Delay(c.attempt)
				if d < 0 || d > c.wantCeil {
					t.Fatalf("Delay(%d) = %s, outside [0, %s]", c.attempt, d, c.wantCeil)
				}
				top, low = max(top, d), min(low, d)
			}
			if c.wantPinned && c.wantCeil > 0 && top < c.wantCeil*9/10 {
				t.Fatalf("largest of 2000 delays %s, want near %s (full jitter spans the range)", top, c.wantCeil)
			}
			if _, isFunc := c.b.(worker.BackoffFunc); !isFunc && c.wantCeil > time.Second && low > c.wantCeil/10 {
				t.Fatalf("smallest of 2000 delays %s: not full jitter", low)
			}
		})
	}
}

func TestRetryAfterNegativeIsZero(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start(worker.Job{Name: "j", MaxAttempts: 3, Handler: func(context.Context, *worker.Job, *worker.Delivery) error {
		return worker.RetryAfter(errBoom, -time.Hour)
	}})
	e.put("m1", "j", "k", "{}")
	if o := e.expect(worker.Retried, "retry_after"); o.Delay != 0 {
		t.Fatalf("delay %s, want 0", o.Delay)
	}
	e.expect(worker.Retried, "retry_after")
	e.expect(worker.DeadLettered, "exhausted") // still capped
}

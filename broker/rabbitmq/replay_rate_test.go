package rabbitmq

import (
	"math"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine/internal/testbin"
)

// waitQuarantined waits (at most within) until the service counts n
// quarantined messages of queue.
func waitQuarantined(t *testing.T, api testbin.API, queue string, n int, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(100 * time.Millisecond) {
		var qs struct {
			Items []struct {
				Queue  string         `json:"queue"`
				Counts map[string]int `json:"counts"`
			} `json:"items"`
		}
		api.MustDo(t, 200, "GET", "/api/v1/queues", nil, &qs)
		got := 0
		for _, q := range qs.Items {
			if q.Queue == queue {
				got = q.Counts["quarantined"]
			}
		}
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d messages of %s quarantined after %s, want %d", got, queue, within, n)
		}
	}
}

// Two service processes on one PostgreSQL replay one batch at rate 200,
// burst 20: at a real consumer, never more than rate + burst (220) in
// any second, with no allowance for lateness; the whole run never faster
// than the rate allows ((n - burst) / rate from the first arrival to the
// last, logged with its deviation), and within 1% of the rate after the
// first second. $QUARANTINE_RATE_TEST_N sets n (default 2,000; the
// issue's figure is 10,000).
func TestReplayTwoProcessesExactRate(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the quarantine binary")
	}
	const rate, burst = 200, 20
	n := 2000
	if s := os.Getenv("QUARANTINE_RATE_TEST_N"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v <= burst {
			t.Fatalf("QUARANTINE_RATE_TEST_N=%q: want a number above %d", s, burst)
		}
		n = v
	}
	br := newBroker(t)
	work, dlq := deadLetters(br, n)
	a, b, token := twoProcesses(t, dlq, work, "replay: {canary: 0, poll: 100ms}\n")
	api := a.API(token)
	waitQuarantined(t, api, work, n, 2*time.Minute)
	got := br.consumeAll(work)
	posted := time.Now()
	created := api.CreateReplay(t, map[string]any{
		"filter": map[string]any{"queue": []string{work}}, "expect_count": n, "rate": rate, "burst": burst, "reason": "exact rate test",
	})
	want := time.Duration(n-burst) * time.Second / rate
	b.API(token).WaitReplay(t, created.ID, want*2+time.Minute, "completed")
	ms := got.waitFor(t, n, 10*time.Second)
	first, last := ms[0].at, ms[0].at
	for _, m := range ms {
		first, last = minTime(first, m.at), maxTime(last, m.at)
	}
	span := last.Sub(first)
	peak := maxPerWindow(ms, time.Second)
	pa, pb := published(t, a)["published"], published(t, b)["published"]
	t.Logf("%d messages: first arrival %s after the POST, then %s (the rate allows %s: %+.2f%%); at most %d in a second; a published %d, b %d; the consumer's longest stall %s",
		n, first.Sub(posted), span, want, 100*(span.Seconds()/want.Seconds()-1), peak, pa, pb, got.longestStall())
	if peak > rate+burst {
		t.Errorf("%d messages arrived within one second; the rate is %d/s with burst %d; arrivals per 100 ms from the first: %v",
			peak, rate, burst, perTenth(ms, first))
	}
	// Never faster than the rate allows, over the whole run; and at the
	// rate within 1% once both processes run (after the first second: the
	// burst, and the start of two processes' workers, whose first leases
	// open database connections, on a loaded machine slower than the
	// rate, when the buckets, full, drop what comes beyond the burst).
	if off := span.Seconds()/want.Seconds() - 1; off < -0.01 {
		t.Errorf("the replay took %s from the first arrival to the last, %.2f%% less than the rate allows (%s)", span, -100*off, want)
	}
	settled, after := first.Add(time.Second), 0
	for _, m := range ms {
		if m.at.After(settled) {
			after++
		}
	}
	steady := float64(after) / last.Sub(settled).Seconds()
	t.Logf("after the first second: %d messages at %.2f/s (%+.2f%%)", after, steady, 100*(steady/rate-1))
	if off := math.Abs(steady/rate - 1); off > 0.01 {
		t.Errorf("after the first second, %d messages arrived at %.2f/s, %.2f%% off the rate %d/s; arrivals per 100 ms from the first: %v",
			after, steady, 100*off, rate, perTenth(ms, first))
	}
	if pa == 0 || pb == 0 || pa+pb != n {
		t.Errorf("process a published %d, b %d: want both to take part, %d in all", pa, pb, n)
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// perTenth counts the arrivals of ms in each 100 ms from first.
func perTenth(ms []replayedMsg, first time.Time) []int {
	var out []int
	for _, m := range ms {
		i := int(m.at.Sub(first) / (100 * time.Millisecond))
		for len(out) <= i {
			out = append(out, 0)
		}
		out[i]++
	}
	return out
}

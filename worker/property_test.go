package worker_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/quarantine-dev/quarantine"

	"github.com/quarantine-dev/quarantine/worker"
)

// behaviour is what a key's handler does: fail transiently fails times,
// then succeed; or fail permanently.
type behaviour struct {
	fails     int
	permanent bool
}

// TestStateMachineProperties drives one worker through random deliveries,
// duplicates, crashes (kills after a claim, kills between the record and
// the ack, consumer crashes), lease expiries, and the retries the worker
// does not count (claim store outages, claims held elsewhere, results
// that cannot be recorded, worker restarts), and checks after every
// step: one terminal result per key (the proof query), at most one
// business effect per key (one more per failed record: the documented
// repeat), never more runs of a message than the attempt cap, a message
// dead-lettered as exhausted ran its handler the cap's number of times
// unless deliveries of it never settled (each of those counts: the
// documented rule), every acknowledged delivery has a durable terminal
// record (its key done), and a dead-lettered message is in the failure
// queue once and never back in the work queue. At the end, after the
// clock runs out every delay: each message is acknowledged or
// dead-lettered, and a key has an effect exactly when it is done (or,
// after a failed record, an effect without being done).
func TestStateMachineProperties(t *testing.T) {
	limitChecks(t, 25)
	rapid.Check(t, func(rt *rapid.T) {
		const maxAttempts, lease = 3, time.Minute
		e := newEnv(rt, withConfig(func(c *worker.Config) { c.ClaimLease = lease }))
		var mu sync.Mutex
		behaviours := map[string]behaviour{}
		failures := map[string]int{}
		var killClaim, killRecord atomic.Bool
		e.claims.set(func(string) bool {
			if killClaim.CompareAndSwap(true, false) {
				e.q.Crash()
				return true
			}
			return false
		}, func(string) {
			if killRecord.CompareAndSwap(true, false) {
				e.q.Crash()
			}
		})
		job := worker.Job{Name: "j", Queue: "work", MaxAttempts: maxAttempts, Concurrency: 3,
			Backoff: worker.Backoff(time.Second, 2, 10*time.Second),
			Handler: func(_ context.Context, _ *worker.Job, d *worker.Delivery) error {
				key := d.Header(worker.HeaderIdempotencyKey)
				e.ran(d.ID)
				mu.Lock()
				b := behaviours[key]
				fail := !b.permanent && failures[key] < b.fails
				if fail {
					failures[key]++
				}
				mu.Unlock()
				switch {
				case b.permanent:
					return worker.Permanent(errBoom)
				case fail:
					return errBoom
				}
				e.effect(key)
				return nil
			}}
		stop := e.start(job)
		defer func() { _ = stop() }()

		var keys, ids, idKeys []string
		send := func(key string) {
			id := fmt.Sprintf("m%d", len(ids))
			ids, idKeys = append(ids, id), append(idKeys, key)
			e.put(id, "j", key, "{}")
		}
		check := func(final bool) {
			e.idle()
			if bad, _ := e.claims.Violations(context.Background()); len(bad) > 0 {
				rt.Fatalf("proof query: %v", bad)
			}
			for _, k := range keys {
				if n := e.effectsOf(k); n > 1+e.claims.recordFailures(k) {
					rt.Fatalf("key %s: %d business effects, %d failed records", k, n, e.claims.recordFailures(k))
				}
				// An effect whose record failed may stay unrecorded when
				// the job is then exhausted (the documented repeat case:
				// the failure envelope's replay runs it again).
				if eff, done := e.effectsOf(k), e.claims.Done(k); final && (done && eff == 0 || !done && eff > 0 && e.claims.recordFailures(k) == 0) {
					rt.Fatalf("key %s: %d effects but done=%v", k, eff, done)
				}
			}
			for i, id := range ids {
				// A result that could not be recorded is retried without
				// counting: its run is one more.
				if n, extra := e.runsOf(id), e.claims.recordFailures(idKeys[i]); n > maxAttempts+extra {
					rt.Fatalf("message %s ran %d times, cap %d (+%d failed records of its key)", id, n, maxAttempts, extra)
				}
			}
			where := map[string]string{}
			for _, j := range e.q.Acked() {
				if !e.claims.Done(j.Headers[worker.HeaderIdempotencyKey]) {
					rt.Fatalf("message %s acked without a terminal record of its key", j.ID)
				}
				where[j.ID] = "acked"
			}
			for _, f := range e.q.Failed() {
				if m := decode(rt, f.Envelope); m.FailureClass == quarantine.ClassExhausted {
					if runs, lost := e.runsOf(f.ID), e.drv.unsettled(f.ID); runs+lost < maxAttempts {
						rt.Fatalf("message %s dead-lettered as exhausted (attempt %d) after %d runs and %d deliveries that never settled, cap %d",
							f.ID, m.Attempts, runs, lost, maxAttempts)
					}
				}
				if where[f.ID] != "" {
					rt.Fatalf("message %s is %s and in the failure queue", f.ID, where[f.ID])
				}
				where[f.ID] = "failed"
			}
			for _, j := range e.q.Waiting() {
				if where[j.ID] != "" {
					rt.Fatalf("message %s is %s and back in the work queue", j.ID, where[j.ID])
				}
			}
			if final {
				for _, id := range ids {
					if where[id] == "" {
						rt.Fatalf("message %s neither acked nor dead-lettered", id)
					}
				}
			}
		}

		rt.Repeat(map[string]func(*rapid.T){
			"new": func(rt *rapid.T) {
				k := fmt.Sprintf("k%d", len(keys))
				b := behaviour{fails: rapid.SampledFrom([]int{0, 0, 1, 2, 5}).Draw(rt, "fails"), permanent: rapid.Float64Range(0, 1).Draw(rt, "p") < 0.2}
				mu.Lock()
				behaviours[k] = b
				mu.Unlock()
				keys = append(keys, k)
				send(k)
			},
			"duplicate": func(rt *rapid.T) {
				if len(keys) == 0 {
					rt.Skip("no key yet")
				}
				send(rapid.SampledFrom(keys).Draw(rt, "key"))
			},
			"claimStoreDown": func(rt *rapid.T) { e.claims.down.Store(true) },
			"claimStoreUp":   func(rt *rapid.T) { e.claims.down.Store(false) },
			"holdElsewhere": func(rt *rapid.T) {
				if len(keys) == 0 {
					rt.Skip("no key yet")
				}
				_, _ = e.claims.Claims.Claim(context.Background(), rapid.SampledFrom(keys).Draw(rt, "key"), "elsewhere", lease)
			},
			"recordFails": func(rt *rapid.T) { e.claims.failComplete.Store(1) },
			"restart": func(rt *rapid.T) {
				_ = stop()
				stop = e.start(job)
			},
			"killAfterClaim":  func(rt *rapid.T) { killClaim.Store(true) },
			"killAfterRecord": func(rt *rapid.T) { killRecord.Store(true) },
			"crash":           func(rt *rapid.T) { e.q.Crash() },
			"advance": func(rt *rapid.T) {
				e.clk.Advance(rapid.SampledFrom([]time.Duration{time.Second, 10 * time.Second, lease / 2, lease, 2 * lease}).Draw(rt, "by"))
			},
			"": func(rt *rapid.T) { check(false) },
		})
		killClaim.Store(false)
		killRecord.Store(false)
		e.claims.down.Store(false)
		e.claims.failComplete.Store(0)
		for range 12 {
			e.clk.Advance(2 * lease)
			e.idle()
		}
		check(true)
	})
}

// limitChecks lowers rapid's number of checks to n unless -rapid.checks
// or RAPID_CHECKS says otherwise: each check runs a real worker.
func limitChecks(t *testing.T, n int) {
	t.Helper()
	if os.Getenv("RAPID_CHECKS") != "" {
		return
	}
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	if !set {
		if err := flag.Set("rapid.checks", fmt.Sprint(n)); err != nil {
			t.Fatal(err)
		}
	}
}

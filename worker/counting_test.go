package worker_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine/broker/memory"
	"github.com/quarantine-dev/quarantine/worker"
	"github.com/quarantine-dev/quarantine/worker/claimtest"
)

// Retries the package documents as "not counted" (a claim store outage, a
// claim held elsewhere, a shutdown, a result that could not be recorded,
// a deferral) must not spend the attempt cap, on a driver whose delivery
// count goes on across a retry (memory, NATS) as on any other.

// The claim store is down for many deliveries (more than the cap), then
// comes back: the job then gets its full MaxAttempts runs.
func TestClaimOutageThenRecoverySpendsNoAttempt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var runs atomic.Int32
	e.claims.down.Store(true)
	e.start(worker.Job{Name: "j", Queue: "work", MaxAttempts: 3,
		Backoff: worker.BackoffFunc(func(int) time.Duration { return 0 }),
		Handler: func(context.Context, *worker.Job, *worker.Delivery) error {
			runs.Add(1)
			return errBoom
		}})
	e.put("m1", "j", "k1", "{}")
	for range 6 {
		o := e.expect(worker.Retried, "claim_error")
		if o.Attempt != 1 || o.Ran {
			t.Fatalf("claim_error outcome = %+v, want attempt 1 (not counted), handler not run", o)
		}
	}
	e.claims.down.Store(false)
	for n := 1; ; n++ {
		o := e.next()
		if o.Class == "claim_error" {
			continue // retries already under way when the store came back
		}
		if n < 3 && (o.Result != worker.Retried || o.Class != "error") {
			t.Fatalf("outcome = %+v, want a counted retry", o)
		}
		if o.Result == worker.DeadLettered {
			if o.Class != "exhausted" || o.Attempt != 3 || !o.Ran {
				t.Fatalf("dead letter = %+v, want exhausted on attempt 3 after a run", o)
			}
			break
		}
	}
	if n := runs.Load(); n != 3 {
		t.Fatalf("the handler ran %d times, want the cap of 3", n)
	}
}

// A handler cancelled at shutdown (MaxAttempts 1) runs again under the
// next worker, as attempt 1.
func TestShutdownThenRestartRunsAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var runs atomic.Int32
	started := make(chan struct{}, 1)
	job := worker.Job{Name: "j", Queue: "work", MaxAttempts: 1,
		Handler: func(ctx context.Context, _ *worker.Job, _ *worker.Delivery) error {
			if runs.Add(1) == 1 {
				started <- struct{}{}
				<-ctx.Done()
				return ctx.Err()
			}
			return nil
		}}
	stop := e.start(job)
	e.put("m1", "j", "k1", "{}")
	<-started
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	o := e.expect(worker.Retried, "shutdown")
	if !o.Ran || o.Attempt != 1 {
		t.Fatalf("shutdown outcome = %+v, want attempt 1 with the handler run", o)
	}
	e.start(job)
	o = e.expect(worker.Completed, "")
	if o.Attempt != 1 || !o.Ran || runs.Load() != 2 {
		t.Fatalf("after the restart: %+v, %d runs; want a second run as attempt 1", o, runs.Load())
	}
	if f := e.q.Failed(); len(f) != 0 {
		t.Fatalf("dead-lettered %d jobs", len(f))
	}
}

// A claim held elsewhere, met twice, costs no attempt (MaxAttempts 1).
func TestClaimHeldRetriesAreNotCounted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	if c, err := e.claims.Claim(ctx, "k1", "other", time.Minute); err != nil || c.Status != worker.Claimed {
		t.Fatalf("claim: %+v %v", c, err)
	}
	e.start(e.effectJob("j", 1))
	e.put("m1", "j", "k1", "{}")
	e.expect(worker.Retried, "claim_held")
	e.idle()
	if err := e.claims.Extend(ctx, "k1", "other", 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(time.Minute)
	e.expect(worker.Retried, "claim_held")
	e.idle()
	if err := e.claims.Release(ctx, "k1", "other"); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(time.Minute)
	o := e.expect(worker.Completed, "")
	if o.Attempt != 1 || !o.Ran {
		t.Fatalf("outcome = %+v, want a run as attempt 1", o)
	}
	claimtest.AssertProof(t, e.claims)
}

// A result that could not be recorded is retried after the lease, not
// counted (MaxAttempts 1): the takeover runs it again and records it.
// Both outcomes say the handler ran.
func TestRecordErrorRetryIsNotCounted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withConfig(func(c *worker.Config) { c.ClaimLease = time.Minute }))
	e.claims.failComplete.Store(1)
	e.start(e.effectJob("j", 1))
	e.put("m1", "j", "k1", "{}")
	o := e.expect(worker.Retried, "record_error")
	if !o.Ran || o.Delay != time.Minute {
		t.Fatalf("record_error outcome = %+v, want the handler run and a delay of the lease", o)
	}
	e.idle()
	e.clk.Advance(time.Minute)
	o = e.expect(worker.Completed, "")
	if o.Attempt != 1 || !o.Ran || e.runsOf("m1") != 2 {
		t.Fatalf("outcome = %+v after %d runs, want a second run as attempt 1", o, e.runsOf("m1"))
	}
	claimtest.AssertProof(t, e.claims)
}

// RetryAfter(1h) on a driver taking at most 15 minutes: the job does not
// run before the hour (deferred without running or counting), then runs
// as attempt 2.
func TestRetryAfterLongerThanTheDriverIsALowerBound(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withQueue(memory.WorkQueueOptions{Limits: worker.Limits{MaxDelay: 15 * time.Minute, DelayStep: time.Second}}))
	var runs atomic.Int32
	e.start(worker.Job{Name: "j", Queue: "work", MaxAttempts: 2,
		Backoff: worker.Backoff(time.Second, 2, time.Minute),
		Handler: func(context.Context, *worker.Job, *worker.Delivery) error {
			if runs.Add(1) == 1 {
				return worker.RetryAfter(errBoom, time.Hour)
			}
			return nil
		}})
	start := e.clk.Now()
	e.put("m1", "j", "k1", "{}")
	o := e.expect(worker.Retried, "retry_after")
	if o.Delay != 15*time.Minute || o.Attempt != 1 {
		t.Fatalf("first retry = %+v, want 15m (the driver's maximum) after attempt 1", o)
	}
	for i := 0; i < 3; i++ {
		e.idle()
		e.clk.Advance(15 * time.Minute)
		o = e.expect(worker.Retried, "deferred")
		if o.Ran || o.Attempt != 2 || o.Delay <= 0 || o.Delay > 15*time.Minute {
			t.Fatalf("deferral %d = %+v, want attempt 2 not run, delay within 15m", i, o)
		}
		if runs.Load() != 1 {
			t.Fatalf("ran again %s after a RetryAfter of 1h", e.clk.Now().Sub(start))
		}
	}
	e.idle()
	e.clk.Advance(15 * time.Minute)
	o = e.expect(worker.Completed, "")
	if o.Attempt != 2 || runs.Load() != 2 {
		t.Fatalf("outcome = %+v after %d runs, want a run as attempt 2", o, runs.Load())
	}
	if got := e.clk.Now().Sub(start); got < time.Hour {
		t.Fatalf("ran again after %s, want at least 1h", got)
	}
}

// Dead letters settled without running the handler say so; so do a
// past-the-cap delivery and a refused schema version.
func TestOutcomeRanIsFalseForDeadLettersThatNeverRan(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withoutClaims())
	started := make(chan struct{}, 1)
	e.start(worker.Job{Name: "j", Queue: "work", MaxAttempts: 1, SchemaVersion: "2", Concurrency: 2,
		Handler: func(ctx context.Context, _ *worker.Job, d *worker.Delivery) error {
			if d.ID == "crash" && e.ran(d.ID) == 1 {
				started <- struct{}{}
				<-ctx.Done()
			}
			return nil
		}})
	e.q.Put(memory.Job{ID: "old", Headers: map[string]string{worker.HeaderJobName: "j", worker.HeaderIdempotencyKey: "k0", worker.HeaderSchemaVersion: "1"}, Body: []byte("{}")})
	o := e.expect(worker.DeadLettered, "permanent")
	if o.Ran {
		t.Fatalf("schema refusal: %+v, want Ran false", o)
	}
	e.put("crash", "j", "k1", "{}")
	<-started
	e.q.Crash() // the first delivery never settles: the redelivery is past the cap
	o = e.expect(worker.DeadLettered, "exhausted")
	if o.Ran || o.Attempt != 2 {
		t.Fatalf("past the cap: %+v, want attempt 2, Ran false", o)
	}
}

// The handler succeeds after its lease expired and another delivery of
// the key took it over and dead-lettered it (releasing the key): the
// worker must not ack without a terminal record. It claims the key again
// and records this run's result.
func TestClaimLostBeforeCompletionIsRecordedNotGuessed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withConfig(func(c *worker.Config) { c.ClaimLease = time.Minute }))
	started, finish := make(chan struct{}, 1), make(chan struct{})
	e.start(worker.Job{Name: "j", Queue: "work", MaxAttempts: 3, Concurrency: 2,
		Handler: func(ctx context.Context, _ *worker.Job, d *worker.Delivery) error {
			e.ran(d.ID)
			if d.ID == "m2" {
				return worker.Permanent(errBoom)
			}
			started <- struct{}{}
			<-finish
			e.effect("k1")
			return nil
		}})
	e.put("m1", "j", "k1", "{}")
	<-started
	e.clk.Advance(2 * time.Minute) // m1's lease expires (no renewal in fake time)
	e.put("m2", "j", "k1", "{}")
	e.expect(worker.DeadLettered, "permanent")
	close(finish)
	o := e.next()
	if o.DeliveryID != "m1" || o.Result != worker.Completed || !o.Ran {
		t.Fatalf("m1 outcome = %+v, want completed after claiming the key again", o)
	}
	e.idle()
	for _, j := range e.q.Acked() {
		if !e.claims.Done(j.Headers[worker.HeaderIdempotencyKey]) {
			t.Fatalf("message %s acked without a terminal record of its key", j.ID)
		}
	}
	if len(e.q.Acked()) != 1 {
		t.Fatalf("acked %d, want m1", len(e.q.Acked()))
	}
	claimtest.AssertProof(t, e.claims)
}

// panicky is a Policy that panics once armed (after Register sampled it).
type panicky struct{ armed *atomic.Bool }

func (p panicky) Delay(int) time.Duration {
	if p.armed.Load() {
		panic("backoff bug")
	}
	return 0
}

// A Policy that panics at run time (here on a claim error, outside the
// handler) is logged and replaced by the default backoff; the process
// survives.
func TestPanickingBackoffDoesNotKillTheWorker(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	armed := &atomic.Bool{}
	e.start(worker.Job{Name: "j", Queue: "work", MaxAttempts: 3, Backoff: panicky{armed}, Handler: func(context.Context, *worker.Job, *worker.Delivery) error {
		return errBoom
	}})
	armed.Store(true)
	e.claims.down.Store(true)
	e.put("m1", "j", "k1", "{}")
	o := e.expect(worker.Retried, "claim_error")
	if o.Delay < 0 || o.Delay > time.Second {
		t.Fatalf("delay %s, want the default backoff's first (at most 1s)", o.Delay)
	}
	e.claims.down.Store(false)
	e.idle()
	e.clk.Advance(time.Second)
	o = e.expect(worker.Retried, "error")
	if o.Delay < 0 || o.Delay > 2*time.Second {
		t.Fatalf("delay %s, want the default backoff's second (at most 2s)", o.Delay)
	}
}

// Definitions that used to panic or be accepted with a meaning nobody
// asked for are refused with an error.
func TestInvalidBackoffAndCapsAreRefused(t *testing.T) {
	t.Parallel()
	h := func(context.Context, *worker.Job, *worker.Delivery) error { return nil }
	armed := &atomic.Bool{}
	armed.Store(true)
	cases := []struct {
		name string
		job  worker.Job
		want string
	}{
		{"nil BackoffFunc", worker.Job{Name: "a", MaxAttempts: 3, Backoff: worker.BackoffFunc(nil), Handler: h}, "nil BackoffFunc"},
		{"negative max", worker.Job{Name: "a", MaxAttempts: 3, Backoff: worker.Backoff(time.Second, 2, -time.Second), Handler: h}, "negative"},
		{"negative initial", worker.Job{Name: "a", MaxAttempts: 3, Backoff: worker.Backoff(-time.Second, 2, time.Minute), Handler: h}, "negative"},
		{"policy panics when sampled", worker.Job{Name: "a", MaxAttempts: 3, Backoff: panicky{armed}, Handler: h}, "panicked"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, err := worker.New(worker.Config{Driver: memory.NewWorkQueue("q", memory.WorkQueueOptions{})})
			if err != nil {
				t.Fatal(err)
			}
			err = w.Register(c.job)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Register = %v, want an error about %q", err, c.want)
			}
		})
	}
	for _, cfg := range []worker.Config{
		{UnknownMaxDeliveries: -1},
		{ClaimLease: -time.Second},
		{DrainTimeout: -time.Second},
	} {
		cfg.Driver = memory.NewWorkQueue("q", memory.WorkQueueOptions{})
		if _, err := worker.New(cfg); err == nil || !strings.Contains(err.Error(), "negative") {
			t.Fatalf("New(%+v) = %v, want a refusal of the negative value", cfg, err)
		}
	}
}

// When one error carries several decisions, the documented one wins
// (package documentation, "Handlers and outcomes").
func TestWrappedDecisionsFollowTheDocumentedPrecedence(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		err    error
		result worker.Result
		class  string
	}{
		{"Reject(Permanent)", worker.Reject(worker.Permanent(errBoom)), worker.Rejected, ""},
		{"Permanent(Reject)", worker.Permanent(worker.Reject(errBoom)), worker.Rejected, ""},
		{"Permanent(RetryAfter)", worker.Permanent(worker.RetryAfter(errBoom, time.Second)), worker.DeadLettered, "permanent"},
		{"RetryAfter(Permanent)", worker.RetryAfter(worker.Permanent(errBoom), time.Second), worker.DeadLettered, "permanent"},
		{"RetryAfter at the cap", worker.RetryAfter(errBoom, time.Second), worker.DeadLettered, "exhausted"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.start(worker.Job{Name: "j", Queue: "work", MaxAttempts: 1,
				Handler: func(context.Context, *worker.Job, *worker.Delivery) error { return c.err }})
			e.put("m1", "j", "k1", "{}")
			e.expect(c.result, c.class)
		})
	}
}

// During a claim store outage the retries back off as the failed claims
// accumulate (up to the job's cap), instead of every second; the first
// claim that succeeds starts again.
func TestClaimOutageBacksOff(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.claims.down.Store(true)
	e.start(worker.Job{Name: "j", Queue: "work", MaxAttempts: 4,
		Backoff: worker.BackoffFunc(func(n int) time.Duration { return time.Duration(n) * time.Second }),
		Handler: func(context.Context, *worker.Job, *worker.Delivery) error { return nil }})
	e.put("m1", "j", "k1", "{}")
	for _, want := range []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 3 * time.Second} {
		o := e.expect(worker.Retried, "claim_error")
		if o.Delay != want {
			t.Fatalf("claim_error delay %s, want %s", o.Delay, want)
		}
		e.idle()
		e.clk.Advance(o.Delay)
	}
	e.claims.down.Store(false)
	e.expect(worker.Completed, "")
}

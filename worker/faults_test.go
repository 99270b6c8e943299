package worker_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/broker/memory"
	"github.com/quarantine-dev/quarantine/worker"
	"github.com/quarantine-dev/quarantine/worker/claimtest"
)

// effectJob is a job whose handler performs one business effect per run.
func (e *env) effectJob(name string, maxAttempts int) worker.Job {
	return worker.Job{Name: name, Queue: "work", MaxAttempts: maxAttempts, Concurrency: 4,
		Handler: func(ctx context.Context, _ *worker.Job, d *worker.Delivery) error {
			e.ran(d.ID)
			e.effect(d.Header(worker.HeaderIdempotencyKey))
			return nil
		}}
}

// Killed after the side effect (recorded) and before the ack: the
// redelivery is acknowledged as a duplicate, one effect in all.
func TestKilledAfterEffectBeforeAck(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var crashed atomic.Int32
	e.claims.set(nil, func(string) {
		if crashed.Add(1) == 1 {
			e.q.Crash() // the process dies between the record and the ack
		}
	})
	e.start(e.effectJob("report", 5))
	e.put("m1", "report", "order-1", `{}`)

	o := e.expect(worker.Duplicate, "") // the first ack never reached the broker: no outcome for it
	if o.Key != "order-1" || o.Attempt != 2 || o.Ran {
		t.Fatalf("duplicate outcome = %+v, want key order-1, attempt 2, handler not run", o)
	}
	e.idle()
	if n := e.effectsOf("order-1"); n != 1 {
		t.Fatalf("%d business effects, want 1", n)
	}
	if acked := e.q.Acked(); len(acked) != 1 || acked[0].Deliveries != 2 {
		t.Fatalf("acked = %+v, want the one job, on its second delivery", acked)
	}
	if !e.claims.Done("order-1") {
		t.Fatal("the key is not recorded as done")
	}
	e.quiet(20 * time.Millisecond)
	claimtest.AssertProof(t, e.claims)
}

// Killed after the claim: the dead worker's lease holds the key until it
// expires (injected clock); then another worker recovers the job.
func TestKilledAfterClaimLeaseExpiresAndAnotherWorkerRecovers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withConfig(func(c *worker.Config) { c.ClaimLease = time.Minute }))
	var killed atomic.Int32
	e.claims.set(func(string) bool {
		if killed.Add(1) == 1 {
			e.q.Crash() // worker A dies holding the claim
			return true
		}
		return false
	}, nil)
	e.start(e.effectJob("report", 5))
	e.put("m1", "report", "order-1", `{}`)

	// The redelivery meets A's live lease: it waits for the lease to end.
	o := e.expect(worker.Retried, "claim_held")
	if o.Delay < 59*time.Second || o.Delay > time.Minute {
		t.Fatalf("held-claim delay = %s, want the lease left (~1m)", o.Delay)
	}
	e.idle()
	e.clk.Advance(59 * time.Second)
	e.idle()
	if n := e.effectsOf("order-1"); n != 0 {
		t.Fatalf("ran %d times while the dead worker's lease was live", n)
	}
	e.clk.Advance(time.Second) // the lease expires
	o = e.expect(worker.Completed, "")
	// The third delivery is attempt 2: the killed delivery counts (it
	// never settled), the retry for the held claim does not.
	if !o.Ran || o.Attempt != 2 {
		t.Fatalf("recovery outcome = %+v, want a run as attempt 2 (the killed delivery counted, the held-claim retry not)", o)
	}
	e.idle()
	if n := e.effectsOf("order-1"); n != 1 {
		t.Fatalf("%d effects, want 1", n)
	}
	claimtest.AssertProof(t, e.claims)
}

// RetryAfter(30s) from a 429: the job does not run again before 30 s.
func TestRetryAfter429NotRunBefore30s(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "30")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	e.start(worker.Job{Name: "report", Queue: "work", MaxAttempts: 5,
		Handler: func(ctx context.Context, _ *worker.Job, d *worker.Delivery) error {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			resp.Body.Close()
			if err := worker.RetryAfterResponse(resp, e.clk.Now(), time.Second, nil); err != nil {
				return err
			}
			e.effect(d.Header(worker.HeaderIdempotencyKey))
			return nil
		}})
	e.put("m1", "report", "k1", `{}`)
	o := e.expect(worker.Retried, "retry_after")
	if o.Delay != 30*time.Second {
		t.Fatalf("delay = %s, want 30s", o.Delay)
	}
	e.idle()
	e.clk.Advance(29*time.Second + 999*time.Millisecond)
	e.idle()
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d calls before 30s, want 1", n)
	}
	e.clk.Advance(time.Millisecond)
	e.expect(worker.Completed, "")
	if n := calls.Load(); n != 2 || e.effectsOf("k1") != 1 {
		t.Fatalf("%d calls, %d effects; want 2 and 1", n, e.effectsOf("k1"))
	}
}

// A permanently invalid payload reaches the failure queue exactly once and
// never bounces through the work queue.
func TestInvalidPayloadDeadLettersOnceNeverBounces(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	type report struct {
		Pages int `json:"pages"`
	}
	var runs atomic.Int32
	e.start(worker.Job{Name: "report", Queue: "work", MaxAttempts: 5,
		Handler: worker.JSON(func(ctx context.Context, d *worker.Delivery, r report) error {
			runs.Add(1)
			return nil
		})})
	secret := `{"pages":"SECRET-CARD-4111"}`
	e.put("m1", "report", "k1", secret)
	o := e.expect(worker.DeadLettered, string(quarantine.ClassMalformed))
	if o.Attempt != 1 {
		t.Fatalf("dead-lettered on attempt %d, want 1", o.Attempt)
	}
	for range 5 {
		e.clk.Advance(time.Hour)
		e.idle()
	}
	e.quiet(20 * time.Millisecond)
	failed := e.q.Failed()
	if len(failed) != 1 || failed[0].Deliveries != 1 {
		t.Fatalf("failure queue = %d entries (deliveries %v), want 1 after one delivery", len(failed), failed)
	}
	if w, f := e.q.Len(); w != 0 || f != 0 || len(e.q.Acked()) != 0 || runs.Load() != 0 {
		t.Fatalf("work queue %d waiting %d in flight, %d acked, %d runs; want all 0", w, f, len(e.q.Acked()), runs.Load())
	}
	m := decode(t, failed[0].Envelope)
	if m.FailureClass != quarantine.ClassMalformed || !strings.Contains(m.Reason, `field "pages"`) {
		t.Fatalf("class %q reason %q, want malformed naming the field", m.FailureClass, m.Reason)
	}
	if strings.Contains(m.Reason, "SECRET") {
		t.Fatalf("the reason quotes the payload: %q", m.Reason)
	}
	if string(m.Payload) != secret || m.IdempotencyKey != "k1" || m.JobName != "report" || m.Queue != "work" {
		t.Fatalf("envelope job = %+v", m)
	}
	// The key is released, not completed: the fixed replay will run.
	if e.claims.Done("k1") {
		t.Fatal("a dead-lettered key was completed")
	}
	claimtest.AssertProof(t, e.claims)
}

// Retries never exceed the cap: MaxAttempts runs, then one exhausted
// dead letter carrying the attempt count and first failure time.
func TestRetriesNeverExceedCap(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const maxAttempts = 4
	var runs atomic.Int32
	e.start(worker.Job{Name: "report", Queue: "work", MaxAttempts: maxAttempts,
		Backoff: worker.Backoff(time.Second, 2, 10*time.Second),
		Handler: func(ctx context.Context, _ *worker.Job, d *worker.Delivery) error {
			if n := runs.Add(1); n > maxAttempts {
				t.Errorf("run %d above the cap %d", n, maxAttempts)
			}
			return errBoom
		}})
	e.put("m1", "report", "k1", `{}`)
	for i := 1; i < maxAttempts; i++ {
		o := e.expect(worker.Retried, "error")
		if o.Attempt != i || o.Delay > time.Second<<(i-1) {
			t.Fatalf("retry %d: attempt %d delay %s, want attempt %d and delay <= %s", i, o.Attempt, o.Delay, i, time.Second<<(i-1))
		}
		e.idle()
		e.clk.Advance(10 * time.Second)
	}
	o := e.expect(worker.DeadLettered, string(quarantine.ClassExhausted))
	for range 3 {
		e.clk.Advance(time.Hour)
		e.idle()
	}
	if n := runs.Load(); n != maxAttempts || o.Attempt != maxAttempts {
		t.Fatalf("%d runs, dead-lettered at attempt %d; want %d", n, o.Attempt, maxAttempts)
	}
	failed := e.q.Failed()
	if len(failed) != 1 {
		t.Fatalf("%d failures, want 1", len(failed))
	}
	m := decode(t, failed[0].Envelope)
	if m.Attempts != maxAttempts || m.FirstFailedAt == nil || !m.FirstFailedAt.Equal(claimtest.Start) ||
		!m.FailedAt.Equal(claimtest.Start.Add((maxAttempts-1)*10*time.Second)) {
		t.Fatalf("envelope attempts %d first_failed_at %v failed_at %v", m.Attempts, m.FirstFailedAt, m.FailedAt)
	}
	if _, ok := m.Headers[worker.HeaderAttempts]; ok {
		t.Fatalf("the envelope carries the worker's bookkeeping header: %v", m.Headers)
	}
	if !strings.HasPrefix(m.Reason, "attempt 4 of 4 failed: boom") {
		t.Fatalf("reason %q", m.Reason)
	}
}

// An unknown job name is retried after 30 s until its 10th delivery, then
// dead-lettered as unknown_name.
func TestUnknownJobNameRetriesThenDeadLetters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start(e.effectJob("report", 3))
	e.put("m1", "no-such-job", "k1", `{}`)
	for i := 1; i < worker.DefaultUnknownMaxDeliveries; i++ {
		o := e.expect(worker.Retried, "unknown_name")
		if o.Delay != 30*time.Second || o.Attempt != i {
			t.Fatalf("delivery %d: delay %s attempt %d", i, o.Delay, o.Attempt)
		}
		e.idle()
		e.clk.Advance(30 * time.Second)
	}
	e.expect(worker.DeadLettered, string(quarantine.ClassUnknownName))
	m := decode(t, e.q.Failed()[0].Envelope)
	if m.JobName != "no-such-job" || m.Attempts != 10 || m.FailureClass != quarantine.ClassUnknownName {
		t.Fatalf("envelope %+v", m)
	}
}

// The key of a dead-lettered job is released, so its replay runs; a
// replay of a completed key is acked without a second effect.
func TestDeadLetteredKeyReplaysCompletedKeyDoesNot(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var fixed atomic.Bool
	e.start(worker.Job{Name: "report", Queue: "work", MaxAttempts: 3,
		Handler: func(ctx context.Context, _ *worker.Job, d *worker.Delivery) error {
			if !fixed.Load() {
				return worker.Permanent(errBoom)
			}
			e.effect(d.Header(worker.HeaderIdempotencyKey))
			return nil
		}})
	e.put("m1", "report", "k1", `{}`)
	e.expect(worker.DeadLettered, string(quarantine.ClassPermanent))
	fixed.Store(true)
	e.put("replay-1", "report", "k1", `{}`)
	e.expect(worker.Completed, "")
	e.put("replay-2", "report", "k1", `{}`)
	e.expect(worker.Duplicate, "")
	if n := e.effectsOf("k1"); n != 1 {
		t.Fatalf("%d effects, want 1", n)
	}
	claimtest.AssertProof(t, e.claims)
}

type boomError struct{}

func (boomError) Error() string { return "boom" }

var errBoom error = boomError{}

// A delivery past the cap (earlier attempts ran but never settled: the
// process died in between) is dead-lettered without running again.
func TestDeliveryAboveCapDeadLettersWithoutRunning(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start(e.effectJob("report", 3))
	e.q.Put(memory.Job{ID: "m1", Deliveries: 3, Body: []byte("{}"),
		Headers: map[string]string{worker.HeaderJobName: "report", worker.HeaderIdempotencyKey: "k1"}})
	o := e.expect(worker.DeadLettered, string(quarantine.ClassExhausted))
	if o.Attempt != 4 || e.runsOf("m1") != 0 {
		t.Fatalf("attempt %d, %d runs; want 4 and none", o.Attempt, e.runsOf("m1"))
	}
	if e.claims.Done("k1") {
		t.Fatal("key completed")
	}
}

package sqs

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/worker"
	"github.com/quarantine-dev/quarantine/worker/claimtest"
)

// The retries the worker does not count (a claim store outage, a
// shutdown) must not spend the cap on SQS either.

// runWorker runs a worker over drv (drain 1 s) and returns its stop.
func runWorker(t *testing.T, j *journal, drv worker.Driver, claims worker.Claims, jobs ...worker.Job) (stop func()) {
	t.Helper()
	w, err := worker.New(worker.Config{Driver: drv, Claims: claims, Logger: quietLogger(), OnOutcome: j.outcome,
		DrainTimeout: time.Second, ClaimLease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for _, job := range jobs {
		if err := w.Register(job); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = w.Run(ctx)
	}()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	t.Cleanup(stop)
	return stop
}

func (j *journal) outcomeList() []worker.Outcome {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]worker.Outcome(nil), j.outcomes...)
}

// The claim store is down for more deliveries than the cap, then comes
// back: the job gets its full MaxAttempts runs.
func TestWorkerClaimOutageThenRecovery(t *testing.T) {
	t.Parallel()
	e := newWorkEnv(t, "work-outage", 30*time.Second)
	drv := e.driver(30*time.Second, nil)
	claims := &claimtest.Outage{Claims: worker.NewMemoryClaims(nil)}
	claims.Down.Store(true)
	j := &journal{}
	job := chargeJob(e.work, j, func(*worker.Delivery) error { return errors.New("card service down") })
	job.MaxAttempts = 3
	runWorker(t, j, drv, claims, job)
	dispatch(t, drv, &job, "order-1", `{}`)
	eventually(t, 30*time.Second, "claim errors past the cap", func() bool { return claims.Failed.Load() >= 6 })
	claims.Down.Store(false)
	eventually(t, 30*time.Second, "a dead letter", func() bool { return j.count(worker.DeadLettered) == 1 })
	if dl := j.first(worker.DeadLettered); dl.Attempt != 3 || dl.Class != string(quarantine.ClassExhausted) || !dl.Ran {
		t.Fatalf("dead letter %+v, want exhausted on attempt 3 after a run", dl)
	}
	if n := len(j.runList()); n != 3 {
		t.Fatalf("the handler ran %d times, want the cap of 3", n)
	}
	for _, o := range j.outcomeList() {
		if o.Class == "claim_error" && (o.Attempt != 1 || o.Ran) {
			t.Fatalf("claim_error outcome %+v: want attempt 1, not run", o)
		}
	}
	if fs := e.failures(1); fs[0].Attempts != 3 || fs[0].FailureClass != quarantine.ClassExhausted {
		t.Fatalf("envelope attempts %d class %q", fs[0].Attempts, fs[0].FailureClass)
	}
	quiet(t, j, e)
}

// A handler cancelled at shutdown (MaxAttempts 1) runs again under the
// next worker, on a new driver, as attempt 1.
func TestWorkerShutdownThenRestart(t *testing.T) {
	t.Parallel()
	e := newWorkEnv(t, "work-restart", 30*time.Second)
	claims := worker.NewMemoryClaims(nil)
	j := &journal{}
	started := make(chan struct{}, 1)
	var runs atomic.Int32
	job := chargeJob(e.work, j, nil)
	job.MaxAttempts = 1
	job.Handler = func(ctx context.Context, _ *worker.Job, d *worker.Delivery) error {
		j.ran(d)
		if runs.Add(1) == 1 {
			started <- struct{}{}
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}
	a := e.driver(30*time.Second, nil)
	stop := runWorker(t, j, a, claims, job)
	dispatch(t, a, &job, "order-1", `{}`)
	<-started
	stop()
	if o := j.first(worker.Retried); o.Class != "shutdown" || !o.Ran || o.Attempt != 1 {
		t.Fatalf("shutdown outcome %+v, want a shutdown retry of a run, attempt 1", o)
	}
	runWorker(t, j, e.driver(30*time.Second, nil), claims, job)
	eventually(t, 30*time.Second, "an outcome after the restart", func() bool { return len(j.outcomeList()) == 2 })
	if o := j.outcomeList()[1]; o.Result != worker.Completed || o.Attempt != 1 || !o.Ran {
		t.Fatalf("after the restart: %+v, want a completion as attempt 1", o)
	}
	quiet(t, j, e)
	if e.depth(e.failURL) != 0 || runs.Load() != 2 {
		t.Fatalf("%d dead letters, %d runs; want 0, 2", e.depth(e.failURL), runs.Load())
	}
}

// A job carrying x-quarantine-not-before (what the worker writes when a
// RetryAfter exceeds the driver's 15 minutes) is deferred on SQS until
// then: re-sent with the header, not run, not counted.
func TestWorkerNotBeforeIsHonoured(t *testing.T) {
	t.Parallel()
	e := newWorkEnv(t, "work-notbefore", 30*time.Second)
	drv := e.driver(30*time.Second, nil)
	j := &journal{}
	job := chargeJob(e.work, j, func(*worker.Delivery) error { return nil })
	job.MaxAttempts = 1
	runWorker(t, j, drv, worker.NewMemoryClaims(nil), job)
	notBefore := time.Now().Add(3 * time.Second)
	if err := worker.Dispatch(context.Background(), drv, &job, "order-1", []byte(`{}`), &worker.DispatchOptions{
		Headers: map[string]string{worker.HeaderNotBefore: notBefore.UTC().Format(time.RFC3339Nano)}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the completion", func() bool { return j.count(worker.Completed) == 1 })
	runs := j.runList()
	if len(runs) != 1 || runs[0].at.Before(notBefore) {
		t.Fatalf("runs %+v, want one at or after %s", runs, notBefore)
	}
	if o := j.first(worker.Retried); o.Class != "deferred" || o.Ran || o.Attempt != 1 {
		t.Fatalf("first outcome %+v, want a deferral of attempt 1 without a run", o)
	}
	if o := j.first(worker.Completed); o.Attempt != 1 {
		t.Fatalf("completion %+v, want attempt 1", o)
	}
	quiet(t, j, e)
}

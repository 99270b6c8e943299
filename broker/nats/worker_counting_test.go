package nats

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

// NakWithDelay keeps the message and counts every delivery: the retries
// the worker does not count must still not spend the cap here.

// The claim store is down for more deliveries than the cap, then comes
// back: the job gets its full MaxAttempts runs, then is dead-lettered as
// exhausted on attempt 3 (not on delivery 7 without running).
func TestWorkerOverNATSClaimOutageThenRecovery(t *testing.T) {
	t.Parallel()
	e := newWorkEnv(t)
	d := e.driver(e.config(5 * time.Second))
	claims := &claimtest.Outage{Claims: worker.NewMemoryClaims(nil)}
	claims.Down.Store(true)
	fx := newEffects()
	job := e.job(func(context.Context, *worker.Job, *worker.Delivery) error {
		fx.ran()
		return errors.New("renderer down")
	})
	job.MaxAttempts = 3
	job.Backoff = worker.BackoffFunc(func(int) time.Duration { return 50 * time.Millisecond })
	r := startWorker(t, d, claims, job)
	dispatch(t, d, &job, "report-1", `{}`)
	eventually(t, 15*time.Second, "claim errors past the cap", func() bool { return claims.Failed.Load() >= 6 })
	claims.Down.Store(false)
	eventually(t, 20*time.Second, "a dead letter", func() bool { return r.count(worker.DeadLettered) == 1 })
	if n := fx.runCount(); n != 3 {
		t.Fatalf("the handler ran %d times, want the cap of 3", n)
	}
	for _, o := range r.results() {
		if o.Class == "claim_error" && (o.Attempt != 1 || o.Ran) {
			t.Fatalf("claim_error outcome %+v: want attempt 1, not run", o)
		}
	}
	fs := e.decodeFailures()
	if len(fs) != 1 || fs[0].FailureClass != quarantine.ClassExhausted || fs[0].Attempts != 3 {
		t.Fatalf("failure envelopes %+v, want one exhausted after 3 attempts", fs)
	}
	if fs[0].FirstFailedAt == nil || !fs[0].FirstFailedAt.Before(fs[0].FailedAt) {
		t.Fatalf("first_failed_at %v, failed_at %v: want the first failure carried across the retries", fs[0].FirstFailedAt, fs[0].FailedAt)
	}
	eventually(t, 10*time.Second, "the consumer to drain", func() bool { return consumerDrained(t, e.js, e.stream, d.Consumer()) })
}

// A handler cancelled at shutdown (MaxAttempts 1) runs again under the
// next worker, on a new connection, as attempt 1.
func TestWorkerOverNATSShutdownThenRestart(t *testing.T) {
	t.Parallel()
	e := newWorkEnv(t)
	claims := worker.NewMemoryClaims(nil)
	fx := newEffects()
	started := make(chan struct{}, 1)
	var runs atomic.Int32
	job := e.job(func(ctx context.Context, _ *worker.Job, d *worker.Delivery) error {
		fx.ran()
		if runs.Add(1) == 1 {
			started <- struct{}{}
			<-ctx.Done()
			return ctx.Err()
		}
		fx.effect(d)
		return nil
	})
	job.MaxAttempts = 1
	a := e.driver(e.config(5 * time.Second))
	ra := startWorker(t, a, claims, job)
	dispatch(t, a, &job, "report-1", `{}`)
	<-started
	ra.stop()
	if got := ra.results(); len(got) != 1 || got[0].Class != "shutdown" || !got[0].Ran {
		t.Fatalf("first worker: %+v, want one shutdown retry of a run", got)
	}
	b := e.driver(e.config(5 * time.Second))
	rb := startWorker(t, b, claims, job)
	eventually(t, 15*time.Second, "an outcome", func() bool { return len(rb.results()) > 0 })
	eventually(t, 15*time.Second, "the completion", func() bool {
		if o := rb.results()[0]; o.Result != worker.Completed {
			t.Fatalf("after the restart: %+v, want a completion", o)
		}
		return true
	})
	if o := rb.results()[0]; o.Attempt != 1 || !o.Ran {
		t.Fatalf("after the restart: %+v, want a run as attempt 1", o)
	}
	if fx.runCount() != 2 || fx.doneCount("report-1") != 1 || len(e.failures()) != 0 {
		t.Fatalf("%d runs, %d effects, %d dead letters; want 2, 1, 0", fx.runCount(), fx.doneCount("report-1"), len(e.failures()))
	}
	eventually(t, 10*time.Second, "the consumer to drain", func() bool { return consumerDrained(t, e.js, e.stream, b.Consumer()) })
}

// A RetryAfter longer than the driver's MaxDelay is a lower bound: the
// job is deferred (not run, not counted) until it passes.
func TestWorkerOverNATSRetryAfterAboveMaxDelay(t *testing.T) {
	t.Parallel()
	e := newWorkEnv(t)
	cfg := e.config(5 * time.Second)
	cfg.MaxDelay = time.Second
	d := e.driver(cfg)
	fx := newEffects()
	var first time.Time
	job := e.job(func(_ context.Context, _ *worker.Job, dl *worker.Delivery) error {
		if fx.ran() == 1 {
			first = time.Now()
			return worker.RetryAfter(errors.New("429"), 3*time.Second)
		}
		fx.effect(dl)
		return nil
	})
	job.MaxAttempts = 2
	r := startWorkerWith(t, worker.Config{Driver: d, Claims: worker.NewMemoryClaims(nil), UnknownRetryDelay: time.Second}, job)
	dispatch(t, d, &job, "report-1", `{}`)
	eventually(t, 20*time.Second, "the completion", func() bool { return r.count(worker.Completed) == 1 })
	if since := time.Since(first); since < 3*time.Second {
		t.Fatalf("ran again %s after RetryAfter(3s)", since)
	}
	deferred := 0
	for _, o := range r.results() {
		if o.Class == "deferred" {
			deferred++
			if o.Ran {
				t.Fatalf("a deferral ran the handler: %+v", o)
			}
		}
		if o.Result == worker.Completed && o.Attempt != 2 {
			t.Fatalf("completion %+v, want attempt 2", o)
		}
	}
	if deferred < 1 || fx.runCount() != 2 {
		t.Fatalf("%d deferrals, %d runs; want at least 1 and 2", deferred, fx.runCount())
	}
}

// A message that arrives on a pull request whose Receive already ended is
// nakked back unseen: it must not count as an attempt (a worker stopping
// while a message is published, then a new worker).
func TestWorkDriverLateDeliveryIsNotAnAttempt(t *testing.T) {
	t.Parallel()
	e := newWorkEnv(t)
	d := e.driver(e.config(10 * time.Second))
	ctx, cancel := context.WithCancel(context.Background()) // no deadline: the pull request waits on
	time.AfterFunc(300*time.Millisecond, cancel)
	if ds, err := d.Receive(ctx, 1); err == nil || len(ds) != 0 {
		t.Fatalf("Receive = %d, %v; want the context's end", len(ds), err)
	}
	job := e.job(nil)
	dispatch(t, d, &job, "report-1", `{}`) // lands on the abandoned pull request
	got := receiveOne(t, d, 10*time.Second)
	if got.Attempt != 2 {
		t.Fatalf("delivery count %d, want 2 (the late delivery first)", got.Attempt)
	}
	if got.Header(worker.HeaderAttempts) != "0" || got.Header(worker.HeaderDelivered) != "1" {
		t.Fatalf("headers %v: want 0 attempts done as of delivery 1", got.Headers)
	}
}

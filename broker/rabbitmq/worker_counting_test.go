package rabbitmq

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/worker"
	"github.com/quarantine-dev/quarantine/worker/claimtest"
)

// The retries the worker does not count (a claim store outage, a
// shutdown) must not spend the cap on RabbitMQ either; quorum work
// queues, whose x-delivery-count counts redeliveries.

// The claim store is down for more deliveries than the cap, then comes
// back: the job gets its full MaxAttempts runs.
func TestWorkerRabbitMQClaimOutageThenRecovery(t *testing.T) {
	t.Parallel()
	f := newWorkFixture(t, amqp.Table{"x-queue-type": "quorum"}, nil)
	claims := &claimtest.Outage{Claims: worker.NewMemoryClaims(nil)}
	claims.Down.Store(true)
	var ran atomic.Int32
	job := f.job("charge", func(context.Context, *worker.Job, *worker.Delivery) error {
		ran.Add(1)
		return errors.New("still down")
	})
	job.MaxAttempts = 3
	f.dispatch(&job, "order-1", "{}")
	stop := f.run(nil, claims, 0, job)
	f.wait(6, 30*time.Second, func(o worker.Outcome) bool { return o.Class == "claim_error" })
	claims.Down.Store(false)
	dl := f.wait(1, 30*time.Second, result(worker.DeadLettered))[0]
	if dl.Attempt != 3 || dl.Class != string(quarantine.ClassExhausted) || !dl.Ran {
		t.Errorf("dead letter %+v, want exhausted on attempt 3 after a run", dl)
	}
	m := f.failed(1)[0]
	if m.Attempts != 3 || m.FailureClass != quarantine.ClassExhausted {
		t.Errorf("envelope attempts %d class %q", m.Attempts, m.FailureClass)
	}
	f.quiesce(stop)
	if n := ran.Load(); n != 3 {
		t.Errorf("the handler ran %d times, want the cap of 3", n)
	}
	if n := f.count(func(o worker.Outcome) bool { return o.Class == "claim_error" && (o.Attempt != 1 || o.Ran) }); n > 0 {
		t.Errorf("%d claim_error outcomes counted an attempt or ran the handler", n)
	}
}

// A handler cancelled at shutdown (MaxAttempts 1) runs again under the
// next worker, on a new connection, as attempt 1.
func TestWorkerRabbitMQShutdownThenRestart(t *testing.T) {
	t.Parallel()
	f := newWorkFixture(t, amqp.Table{"x-queue-type": "quorum"}, nil)
	claims := worker.NewMemoryClaims(nil)
	var ran atomic.Int32
	started := make(chan struct{}, 1)
	job := f.job("charge", func(ctx context.Context, _ *worker.Job, _ *worker.Delivery) error {
		if ran.Add(1) == 1 {
			started <- struct{}{}
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	})
	job.MaxAttempts = 1
	f.dispatch(&job, "order-1", "{}")
	stop := f.run(nil, claims, 0, job)
	<-started
	stop()
	if o := f.wait(1, 10*time.Second, result(worker.Retried))[0]; o.Class != "shutdown" || !o.Ran || o.Attempt != 1 {
		t.Fatalf("shutdown outcome %+v, want a shutdown retry of a run, attempt 1", o)
	}
	_ = f.drv.Close()
	next := f.driver(nil)
	stop = f.run(next, claims, 0, job)
	o := f.wait(1, 30*time.Second, func(o worker.Outcome) bool { return o.Result != worker.Retried })[0]
	if o.Result != worker.Completed || o.Attempt != 1 || !o.Ran {
		t.Fatalf("after the restart: %+v, want a completion as attempt 1", o)
	}
	stop()
	if n := ran.Load(); n != 2 {
		t.Errorf("the handler ran %d times, want 2", n)
	}
	if n := f.b.depth(f.failure); n != 0 {
		t.Errorf("%d dead letters", n)
	}
}

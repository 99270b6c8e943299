package memory_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine/broker/memory"
	"github.com/quarantine-dev/quarantine/replay"
	"github.com/quarantine-dev/quarantine/worker"
	"github.com/quarantine-dev/quarantine/worker/claimtest"
)

func newQueue(t *testing.T, opt memory.WorkQueueOptions) (*memory.WorkQueue, *claimtest.Clock) {
	t.Helper()
	clk := claimtest.NewClock(claimtest.Start)
	opt.Now = clk.Now
	return memory.NewWorkQueue("work", opt), clk
}

func receive(t *testing.T, q *memory.WorkQueue, max int) []*worker.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ds, err := q.Receive(ctx, max)
	if err != nil {
		t.Fatalf("Receive: %v", err)
	}
	return ds
}

// nothing asserts that Receive finds nothing ready.
func nothing(t *testing.T, q *memory.WorkQueue) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if ds, err := q.Receive(ctx, 10); !errors.Is(err, context.DeadlineExceeded) || len(ds) != 0 {
		t.Fatalf("Receive = %d deliveries, %v; want none before the delay", len(ds), err)
	}
}

func TestWorkQueueRetryDelayFollowsTheClock(t *testing.T) {
	t.Parallel()
	q, clk := newQueue(t, memory.WorkQueueOptions{})
	q.Put(memory.Job{ID: "m1", JobName: "j", Body: []byte("{}"), Headers: map[string]string{"a": "1"}})
	d := receive(t, q, 10)[0]
	if d.ID != "m1" || d.Attempt != 1 || d.JobName != "j" || d.Queue != "work" || !d.EnqueuedAt.Equal(claimtest.Start) {
		t.Fatalf("delivery %+v", d)
	}
	d.Headers[worker.HeaderAttempts] = "1"
	if err := q.Retry(context.Background(), d, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	clk.Advance(10*time.Second - time.Nanosecond)
	nothing(t, q)
	clk.Advance(time.Nanosecond)
	d = receive(t, q, 10)[0]
	if d.Attempt != 2 || d.Headers[worker.HeaderAttempts] != "1" || d.Headers["a"] != "1" {
		t.Fatalf("redelivery %+v, want attempt 2 with the retry's headers", d)
	}
	if err := q.Ack(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	if err := q.Ack(context.Background(), d); !errors.Is(err, memory.ErrNotInFlight) {
		t.Fatalf("second Ack = %v, want ErrNotInFlight", err)
	}
	if len(q.Acked()) != 1 {
		t.Fatal("not acked")
	}
}

func TestWorkQueueReceiveTakesAtMostMax(t *testing.T) {
	t.Parallel()
	q, _ := newQueue(t, memory.WorkQueueOptions{})
	for _, id := range []string{"a", "b", "c"} {
		q.Put(memory.Job{ID: id})
	}
	if ds := receive(t, q, 2); len(ds) != 2 || ds[0].ID != "a" || ds[1].ID != "b" {
		t.Fatalf("got %d deliveries, want a and b in order", len(ds))
	}
	if w, f := q.Len(); w != 1 || f != 2 {
		t.Fatalf("%d waiting %d in flight, want 1 and 2", w, f)
	}
}

func TestWorkQueueCrashRedeliversInFlight(t *testing.T) {
	t.Parallel()
	q, _ := newQueue(t, memory.WorkQueueOptions{})
	q.Put(memory.Job{ID: "m1"})
	old := receive(t, q, 1)[0]
	if n := q.Crash(); n != 1 {
		t.Fatalf("Crash put back %d, want 1", n)
	}
	ctx := context.Background()
	for name, err := range map[string]error{
		"Ack": q.Ack(ctx, old), "Retry": q.Retry(ctx, old, 0), "Reject": q.Reject(ctx, old),
		"DeadLetter": q.DeadLetter(ctx, old, []byte("{}")), "Extend": q.Extend(ctx, old),
	} {
		if !errors.Is(err, memory.ErrNotInFlight) {
			t.Errorf("%s of a crashed delivery = %v, want ErrNotInFlight", name, err)
		}
	}
	if d := receive(t, q, 1)[0]; d.ID != "m1" || d.Attempt != 2 {
		t.Fatalf("redelivery %+v", d)
	}
}

func TestWorkQueueDeadLetterConfirmsOnTheBrokerFirst(t *testing.T) {
	t.Parallel()
	b := memory.New("work.failed")
	q, _ := newQueue(t, memory.WorkQueueOptions{Broker: b, FailureQueue: "work.failed"})
	q.Put(memory.Job{ID: "m1", JobName: "j"})
	d := receive(t, q, 1)[0]
	b.SetDown(true)
	if err := q.DeadLetter(context.Background(), d, []byte(`{"envelope":"x"}`)); err == nil {
		t.Fatal("DeadLetter succeeded with the broker down")
	}
	if _, f := q.Len(); f != 1 || len(q.Failed()) != 0 {
		t.Fatalf("after a refused dead letter: %d in flight, %d failed; want 1 and 0", f, len(q.Failed()))
	}
	b.SetDown(false)
	if err := q.DeadLetter(context.Background(), d, []byte(`{"envelope":"x"}`)); err != nil {
		t.Fatal(err)
	}
	msgs := b.Messages("work.failed")
	if len(msgs) != 1 || string(msgs[0].Payload) != `{"envelope":"x"}` || msgs[0].ContentType != "application/json" {
		t.Fatalf("failure queue on the broker: %+v", msgs)
	}
	if f := q.Failed(); len(f) != 1 || f[0].ID != "m1" {
		t.Fatalf("Failed = %+v", f)
	}
}

func TestWorkQueueRejectPolicy(t *testing.T) {
	t.Parallel()
	for _, requeue := range []bool{false, true} {
		q, _ := newQueue(t, memory.WorkQueueOptions{RejectRequeue: requeue})
		q.Put(memory.Job{ID: "m1"})
		if err := q.Reject(context.Background(), receive(t, q, 1)[0]); err != nil {
			t.Fatal(err)
		}
		w, _ := q.Len()
		if requeue && (w != 1 || len(q.Rejected()) != 0) || !requeue && (w != 0 || len(q.Rejected()) != 1) {
			t.Fatalf("requeue=%v: %d waiting, %d rejected", requeue, w, len(q.Rejected()))
		}
	}
}

// What the replay engine publishes on a Broker lands in the work queue.
func TestWorkQueueFeedFromBroker(t *testing.T) {
	t.Parallel()
	b := memory.New("work", "other")
	out := replay.Outgoing{Queue: "work", MessageID: "replay-1", JobName: "j", ContentType: "application/json",
		Payload: []byte(`{"a":1}`), Headers: map[string]string{replay.HeaderIdempotencyKey: "k1", replay.HeaderJobName: "j"}}
	b.Publish(context.Background(), []replay.Outgoing{out})
	q, _ := newQueue(t, memory.WorkQueueOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q.FeedFrom(ctx, b, "work")
	out.MessageID = "replay-2"
	b.Publish(context.Background(), []replay.Outgoing{out, {Queue: "other", MessageID: "x"}})
	ds := receive(t, q, 10)
	if len(ds) != 2 || ds[0].ID != "replay-1" || ds[1].ID != "replay-2" {
		t.Fatalf("got %d deliveries, want replay-1 and replay-2", len(ds))
	}
	if d := ds[1]; d.Header(worker.HeaderIdempotencyKey) != "k1" || d.JobName != "j" || string(d.Body) != `{"a":1}` {
		t.Fatalf("delivery %+v", d)
	}
}

func TestWorkQueueSend(t *testing.T) {
	t.Parallel()
	q, _ := newQueue(t, memory.WorkQueueOptions{})
	job := &worker.Job{Name: "j", Queue: "elsewhere", SchemaVersion: "1"}
	if err := worker.Dispatch(context.Background(), q, job, "k", []byte("{}"), nil); err == nil {
		t.Fatal("sent a message for another queue")
	}
	job.Queue = "work"
	if err := worker.Dispatch(context.Background(), q, job, "k", []byte("{}"), nil); err != nil {
		t.Fatal(err)
	}
	if d := receive(t, q, 1)[0]; d.Header(worker.HeaderIdempotencyKey) != "k" || d.JobName != "j" || d.ContentType != "application/json" {
		t.Fatalf("delivery %+v", d)
	}
}

package memory

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/quarantine-dev/quarantine/replay"
	"github.com/quarantine-dev/quarantine/worker"
)

// ErrNotInFlight is returned by a WorkQueue settlement for a delivery that
// is no longer in flight: it was settled already, or Crash put it back.
var ErrNotInFlight = errors.New("memory: the delivery is no longer in flight")

// Job is one job message a WorkQueue holds.
type Job struct {
	ID          string
	JobName     string
	ContentType string
	Headers     map[string]string
	Body        []byte
	// Deliveries counts the times the job was received (its attempt).
	Deliveries int
	EnqueuedAt time.Time
	ReadyAt    time.Time // not delivered before
}

// FailedJob is a job dead-lettered to the failure queue, with the
// canonical failure envelope the worker wrote.
type FailedJob struct {
	Job
	Envelope []byte
}

// WorkQueueOptions configure a WorkQueue; the zero value is usable.
type WorkQueueOptions struct {
	// Now is the clock deciding when a delayed job is ready; default
	// time.Now. Receive polls it every millisecond, so a test advancing
	// an injected clock needs nothing else.
	Now func() time.Time
	// Limits is what the driver declares (worker.Driver.Limits);
	// RetryKeepsCount is always set (Retry puts the same job back, and
	// Deliveries goes on counting).
	Limits worker.Limits
	// Broker and FailureQueue: when both are set, DeadLetter also
	// publishes the envelope to FailureQueue on Broker (and fails, leaving
	// the job in flight, when that publish is not confirmed).
	Broker       *Broker
	FailureQueue string
	// RejectRequeue makes Reject put the job back (a broker whose
	// rejection policy requeues); by default a rejected job is dropped
	// into Rejected, as RabbitMQ does without a dead-letter exchange.
	RejectRequeue bool
}

// WorkQueue is an in-process work queue and failure queue: a
// worker.Driver for consumers and a worker.Sender for producers. Delays
// follow an injectable clock; a job not settled stays in flight until it
// is settled or Crash puts it back. The zero value is not usable: call
// NewWorkQueue.
type WorkQueue struct {
	name string
	opt  WorkQueueOptions

	mu       sync.Mutex
	due      []*Job    // ready to deliver, FIFO from head
	head     int       // due[:head] were delivered
	delayed  delayHeap // not ready before their ReadyAt
	inflight map[uint64]*Job
	tag      uint64
	failed   []FailedJob
	rejected []Job
	acked    []Job
	notify   chan struct{}
}

var (
	_ worker.Driver = (*WorkQueue)(nil)
	_ worker.Sender = (*WorkQueue)(nil)
)

// NewWorkQueue returns an empty work queue called name.
func NewWorkQueue(name string, opt WorkQueueOptions) *WorkQueue {
	if opt.Now == nil {
		opt.Now = time.Now
	}
	return &WorkQueue{name: name, opt: opt, inflight: map[uint64]*Job{}, notify: make(chan struct{})}
}

// Name returns the queue's name.
func (q *WorkQueue) Name() string { return q.name }

// Put enqueues j as given (tests use it for hand-made messages); a zero
// EnqueuedAt or ReadyAt becomes now.
func (q *WorkQueue) Put(j Job) {
	now := q.opt.Now()
	if j.EnqueuedAt.IsZero() {
		j.EnqueuedAt = now
	}
	if j.ReadyAt.IsZero() {
		j.ReadyAt = now
	}
	j.Headers = maps.Clone(j.Headers)
	q.mu.Lock()
	q.enqueue(&j, now)
	q.wake()
	q.mu.Unlock()
}

// enqueue adds j to the due list or the delayed heap. Callers hold mu.
func (q *WorkQueue) enqueue(j *Job, now time.Time) {
	if j.ReadyAt.After(now) {
		heap.Push(&q.delayed, j)
		return
	}
	if q.head > 0 && q.head == len(q.due) {
		clear(q.due)
		q.due, q.head = q.due[:0], 0
	}
	q.due = append(q.due, j)
}

// Send implements worker.Sender: m is enqueued at once. It returns an
// error when m names another queue.
func (q *WorkQueue) Send(ctx context.Context, m *worker.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if m.Queue != "" && m.Queue != q.name {
		return fmt.Errorf("memory: message for queue %q sent to %q", m.Queue, q.name)
	}
	q.Put(Job{ID: m.ID, JobName: m.JobName, ContentType: m.ContentType, Headers: m.Headers, Body: m.Body})
	return nil
}

// FeedFrom declares queue on b and, until ctx ends, copies every message
// published there (by the replay engine through (*Broker).Publish), those
// already held first, into q in publish order. It reads b by offset, as
// Source does, and returns at once; b keeps its own copies (a Broker
// keeps every message).
func (q *WorkQueue) FeedFrom(ctx context.Context, b *Broker, queue string) {
	b.Declare(queue)
	go func() {
		next := 0
		for {
			msgs, err := b.Wait(ctx, queue, next+1)
			for _, m := range msgs[min(next, len(msgs)):] {
				q.Put(fromOutgoing(m))
			}
			next = max(next, len(msgs))
			if err != nil {
				return
			}
		}
	}()
}

func fromOutgoing(m Message) Job {
	return Job{ID: m.MessageID, JobName: m.JobName, ContentType: m.ContentType, Headers: m.Headers, Body: m.Payload}
}

func (q *WorkQueue) wake() {
	close(q.notify)
	q.notify = make(chan struct{})
}

// Receive implements worker.Driver.
func (q *WorkQueue) Receive(ctx context.Context, max int) ([]*worker.Delivery, error) {
	for {
		q.mu.Lock()
		now := q.opt.Now()
		for len(q.delayed) > 0 && !q.delayed[0].ReadyAt.After(now) {
			q.due = append(q.due, heap.Pop(&q.delayed).(*Job))
		}
		var out []*worker.Delivery
		for q.head < len(q.due) && len(out) < max {
			j := q.due[q.head]
			q.due[q.head] = nil
			q.head++
			j.Deliveries++
			q.tag++
			q.inflight[q.tag] = j
			out = append(out, &worker.Delivery{
				ID: j.ID, Queue: q.name, JobName: j.JobName, Headers: maps.Clone(j.Headers),
				Body: j.Body, ContentType: j.ContentType, Attempt: j.Deliveries,
				EnqueuedAt: j.EnqueuedAt, Ref: q.tag,
			})
		}
		if q.head == len(q.due) {
			q.due, q.head = q.due[:0], 0
		} else if q.head > 1024 && q.head > len(q.due)/2 {
			n := copy(q.due, q.due[q.head:])
			clear(q.due[n:])
			q.due, q.head = q.due[:n], 0
		}
		ch := q.notify
		q.mu.Unlock()
		if len(out) > 0 {
			return out, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-ch:
		case <-time.After(time.Millisecond):
		}
	}
}

// take removes d from the in-flight set.
func (q *WorkQueue) take(d *worker.Delivery) (*Job, error) {
	tag, _ := d.Ref.(uint64)
	j, ok := q.inflight[tag]
	if !ok {
		return nil, fmt.Errorf("delivery %s: %w", d.ID, ErrNotInFlight)
	}
	delete(q.inflight, tag)
	return j, nil
}

// Ack implements worker.Driver.
func (q *WorkQueue) Ack(_ context.Context, d *worker.Delivery) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	j, err := q.take(d)
	if err != nil {
		return err
	}
	q.acked = append(q.acked, *j)
	return nil
}

// Retry implements worker.Driver: the job comes back after delay with
// d's headers.
func (q *WorkQueue) Retry(_ context.Context, d *worker.Delivery, delay time.Duration) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	j, err := q.take(d)
	if err != nil {
		return err
	}
	j.Headers = maps.Clone(d.Headers)
	now := q.opt.Now()
	j.ReadyAt = now.Add(delay)
	q.enqueue(j, now)
	q.wake()
	return nil
}

// DeadLetter implements worker.Driver: the envelope goes to the failure
// queue (and to the Broker's FailureQueue when configured, confirmed
// first), then the job leaves the work queue.
func (q *WorkQueue) DeadLetter(ctx context.Context, d *worker.Delivery, envelope []byte) error {
	q.mu.Lock()
	tag, _ := d.Ref.(uint64)
	_, ok := q.inflight[tag]
	q.mu.Unlock()
	if !ok {
		return fmt.Errorf("delivery %s: %w", d.ID, ErrNotInFlight)
	}
	if q.opt.Broker != nil && q.opt.FailureQueue != "" {
		res := q.opt.Broker.Publish(ctx, []replay.Outgoing{{
			Queue: q.opt.FailureQueue, MessageID: "dlq-" + d.ID, JobName: d.JobName,
			ContentType: "application/json", Payload: envelope,
		}})
		if res[0].Err != nil {
			return fmt.Errorf("memory: publishing to failure queue %s: %w", q.opt.FailureQueue, res[0].Err)
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	j, err := q.take(d)
	if err != nil {
		return err
	}
	q.failed = append(q.failed, FailedJob{Job: *j, Envelope: envelope})
	return nil
}

// Reject implements worker.Driver.
func (q *WorkQueue) Reject(_ context.Context, d *worker.Delivery) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	j, err := q.take(d)
	if err != nil {
		return err
	}
	if q.opt.RejectRequeue {
		j.ReadyAt = q.opt.Now()
		q.enqueue(j, j.ReadyAt)
		q.wake()
		return nil
	}
	q.rejected = append(q.rejected, *j)
	return nil
}

// Extend implements worker.Driver: it fails for a delivery no longer in
// flight (a lease lost to Crash).
func (q *WorkQueue) Extend(_ context.Context, d *worker.Delivery) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	tag, _ := d.Ref.(uint64)
	if _, ok := q.inflight[tag]; !ok {
		return fmt.Errorf("delivery %s: %w", d.ID, ErrNotInFlight)
	}
	return nil
}

// Limits implements worker.Driver.
func (q *WorkQueue) Limits() worker.Limits {
	l := q.opt.Limits
	l.RetryKeepsCount = true
	return l
}

// Crash simulates consumers dying: every in-flight delivery goes back to
// the queue, ready now, and settling the old deliveries fails with
// ErrNotInFlight. It returns how many were put back.
func (q *WorkQueue) Crash() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.opt.Now()
	n := len(q.inflight)
	tags := make([]uint64, 0, n)
	for tag := range q.inflight {
		tags = append(tags, tag)
	}
	slices.Sort(tags) // back in delivery order
	for _, tag := range tags {
		j := q.inflight[tag]
		j.ReadyAt = now
		q.enqueue(j, now)
		delete(q.inflight, tag)
	}
	if n > 0 {
		q.wake()
	}
	return n
}

// Len returns how many jobs wait (ready or delayed) and how many are in
// flight.
func (q *WorkQueue) Len() (waiting, inflight int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.due) - q.head + len(q.delayed), len(q.inflight)
}

// Waiting returns copies of the jobs waiting: the ready ones in order,
// then the delayed ones.
func (q *WorkQueue) Waiting() []Job {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]Job, 0, len(q.due)-q.head+len(q.delayed))
	for _, j := range q.due[q.head:] {
		out = append(out, *j)
	}
	for _, j := range q.delayed {
		out = append(out, *j)
	}
	return out
}

// Failed returns the failure queue, oldest first.
func (q *WorkQueue) Failed() []FailedJob {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]FailedJob(nil), q.failed...)
}

// Acked returns the jobs acknowledged, oldest first.
func (q *WorkQueue) Acked() []Job {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]Job(nil), q.acked...)
}

// Rejected returns the jobs rejected (without RejectRequeue).
func (q *WorkQueue) Rejected() []Job {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]Job(nil), q.rejected...)
}

// delayHeap orders delayed jobs by ReadyAt (container/heap).
type delayHeap []*Job

func (h delayHeap) Len() int           { return len(h) }
func (h delayHeap) Less(i, j int) bool { return h[i].ReadyAt.Before(h[j].ReadyAt) }
func (h delayHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *delayHeap) Push(x any)        { *h = append(*h, x.(*Job)) }
func (h *delayHeap) Pop() any {
	old := *h
	j := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return j
}

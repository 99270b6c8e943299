package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
	"github.com/quarantine-dev/quarantine/replay"
	"github.com/quarantine-dev/quarantine/worker"
	"github.com/quarantine-dev/quarantine/worker/sqliteclaims"
)

// workFixture is a work queue and a failure queue on the real broker, a
// WorkDriver on them, and the outcomes of the worker running on it.
type workFixture struct {
	t       testing.TB
	b       *testBroker
	work    string
	failure string
	drv     *WorkDriver

	mu       sync.Mutex
	outcomes []worker.Outcome
	changed  chan struct{}
}

// newWorkFixture declares the queues (workArgs for the work queue) and a
// driver on them (mod changes its config).
func newWorkFixture(t testing.TB, workArgs amqp.Table, mod func(*WorkConfig)) *workFixture {
	t.Helper()
	b := newBroker(t)
	f := &workFixture{t: t, b: b, changed: make(chan struct{})}
	f.failure = b.failureQueue(nil)
	f.work = b.declare(b.name("work"), workArgs)
	f.drv = f.driver(mod)
	return f
}

// driver returns another driver on the fixture's queues, closed (and its
// delay queues deleted) when the test ends.
func (f *workFixture) driver(mod func(*WorkConfig)) *WorkDriver {
	f.t.Helper()
	cfg := WorkConfig{URL: f.b.url, Queue: f.work, FailureQueue: f.failure}
	if mod != nil {
		mod(&cfg)
	}
	d, err := NewWorkDriver(cfg, testLogger(f.t))
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() {
		_ = d.Close()
		conn, err := amqp.Dial(f.b.url)
		if err != nil {
			return
		}
		defer conn.Close()
		if ch, err := conn.Channel(); err == nil {
			for _, q := range d.usedDelayQueues() {
				_, _ = ch.QueueDelete(q, false, false, false)
			}
		}
	})
	return d
}

// job returns a job definition on the fixture's work queue.
func (f *workFixture) job(name string, h worker.Handler) worker.Job {
	return worker.Job{Name: name, Queue: f.work, SchemaVersion: "1", Concurrency: 4,
		Backoff: worker.BackoffFunc(func(int) time.Duration { return 0 }), Handler: h}
}

// run starts a worker on drv (the fixture's driver when nil) with claims
// and jobs; the returned stop function stops it (also at cleanup).
func (f *workFixture) run(drv *WorkDriver, claims worker.Claims, lease time.Duration, jobs ...worker.Job) func() {
	f.t.Helper()
	if drv == nil {
		drv = f.drv
	}
	w, err := worker.New(worker.Config{Driver: drv, Claims: claims, ClaimLease: lease, Logger: testLogger(f.t),
		DrainTimeout: 5 * time.Second, SettleTimeout: 5 * time.Second, OnOutcome: f.record})
	if err != nil {
		f.t.Fatal(err)
	}
	for _, j := range jobs {
		if err := w.Register(j); err != nil {
			f.t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				f.t.Errorf("worker: %v", err)
			}
		})
	}
	f.t.Cleanup(stop)
	return stop
}

func (f *workFixture) record(o worker.Outcome) {
	f.mu.Lock()
	f.outcomes = append(f.outcomes, o)
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
}

// wait waits until n outcomes match pred and returns them.
func (f *workFixture) wait(n int, within time.Duration, pred func(worker.Outcome) bool) []worker.Outcome {
	f.t.Helper()
	deadline := time.After(within)
	for {
		f.mu.Lock()
		var got []worker.Outcome
		for _, o := range f.outcomes {
			if pred(o) {
				got = append(got, o)
			}
		}
		ch := f.changed
		all := slices.Clone(f.outcomes)
		f.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-ch:
		case <-deadline:
			f.t.Fatalf("%d of %d outcomes within %s; all outcomes: %+v", len(got), n, within, all)
		}
	}
}

// count returns how many outcomes match pred.
func (f *workFixture) count(pred func(worker.Outcome) bool) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, o := range f.outcomes {
		if pred(o) {
			n++
		}
	}
	return n
}

func result(r worker.Result) func(worker.Outcome) bool {
	return func(o worker.Outcome) bool { return o.Result == r }
}

// dispatch sends a job through the driver's Sender.
func (f *workFixture) dispatch(j *worker.Job, key string, payload any) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := worker.Dispatch(ctx, f.drv, j, key, payload, nil); err != nil {
		f.t.Fatalf("dispatch %s: %v", key, err)
	}
}

// failed takes n messages off the failure queue (acking them) and decodes
// them as failure envelopes; it fails the test when one is not valid.
// quiesce stops the worker (stop, from run) and closes its driver, so
// that a delivery it did not acknowledge returns to its queue, then fails
// the test unless the work queue and every delay queue used hold
// nothing: no copy of a job is left to run again. Tests call it instead
// of waiting for a redelivery that should not come.
func (f *workFixture) quiesce(stop func()) {
	f.t.Helper()
	stop()
	_ = f.drv.Close()
	for _, q := range append([]string{f.work}, f.drv.usedDelayQueues()...) {
		if n := f.b.depth(q); n != 0 {
			f.t.Errorf("%d messages left on %s: a copy of a job could run again", n, q)
		}
	}
}

func (f *workFixture) failed(n int) []*quarantine.Message {
	f.t.Helper()
	f.b.waitDepth(f.failure, n)
	ch, err := f.b.conn.Channel()
	if err != nil {
		f.t.Fatal(err)
	}
	defer ch.Close()
	var out []*quarantine.Message
	for len(out) < n {
		d, ok, err := ch.Get(f.failure, true)
		if err != nil || !ok {
			f.t.Fatalf("get from %s: %v (ok %t)", f.failure, err, ok)
		}
		if d.ContentType != "application/json" {
			f.t.Errorf("failure message content type %q", d.ContentType)
		}
		m, problems := collect.DecodeEnvelope(d.Body, collect.Origin{Source: "test", Kind: quarantine.SourceRabbitMQ})
		if len(problems) > 0 {
			f.t.Fatalf("the failure message is not a valid envelope: %v\n%s", problems, d.Body)
		}
		out = append(out, m)
	}
	return out
}

func TestWorkDriverConfig(t *testing.T) {
	t.Parallel()
	ok := WorkConfig{URL: "amqp://u:hunter2@127.0.0.1:5672/", Queue: "orders", FailureQueue: "orders.failed"}
	for name, mod := range map[string]func(*WorkConfig){
		"no url":             func(c *WorkConfig) { c.URL = "" },
		"bad scheme":         func(c *WorkConfig) { c.URL = "http://u:hunter2@h/" },
		"no queue":           func(c *WorkConfig) { c.Queue = "" },
		"no failure queue":   func(c *WorkConfig) { c.FailureQueue = "" },
		"same queues":        func(c *WorkConfig) { c.FailureQueue = c.Queue },
		"bad queue type":     func(c *WorkConfig) { c.QueueType = "stream" },
		"long queue":         func(c *WorkConfig) { c.Queue = string(make([]byte, 250)) },
		"negative prefetch":  func(c *WorkConfig) { c.Prefetch = -1 },
		"empty buckets":      func(c *WorkConfig) { c.DelayBuckets = []time.Duration{} },
		"unsorted buckets":   func(c *WorkConfig) { c.DelayBuckets = []time.Duration{2 * time.Second, time.Second} },
		"sub-ms bucket":      func(c *WorkConfig) { c.DelayBuckets = []time.Duration{1500 * time.Microsecond} },
		"bucket above 24 h":  func(c *WorkConfig) { c.DelayBuckets = []time.Duration{25 * time.Hour} },
		"too many buckets":   func(c *WorkConfig) { c.DelayBuckets = make([]time.Duration, MaxDelayBuckets+1) },
		"zero bucket":        func(c *WorkConfig) { c.DelayBuckets = []time.Duration{0} },
		"duplicate a bucket": func(c *WorkConfig) { c.DelayBuckets = []time.Duration{time.Second, time.Second} },
	} {
		c := ok
		mod(&c)
		_, err := NewWorkDriver(c, nil)
		var qe *quarantine.Error
		if !errors.As(err, &qe) || qe.Code != quarantine.EINVALID {
			t.Errorf("%s: NewWorkDriver = %v, want EINVALID", name, err)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: the error shows the password: %v", name, err)
		}
	}
	d, err := NewWorkDriver(ok, nil)
	if err != nil {
		t.Fatal(err)
	}
	lim := d.Limits()
	if lim.MaxDelay != 24*time.Hour || lim.DelayStep != time.Millisecond || lim.RenewEvery != 0 {
		t.Errorf("Limits = %+v", lim)
	}
	for delay, want := range map[time.Duration]time.Duration{
		time.Nanosecond: 250 * time.Millisecond, 250 * time.Millisecond: 250 * time.Millisecond,
		1500 * time.Millisecond: 2 * time.Second, 31 * time.Second: 45 * time.Second, 24 * time.Hour: 24 * time.Hour,
	} {
		if got := d.bucket(delay); got != want {
			t.Errorf("bucket(%s) = %s, want %s", delay, got, want)
		}
	}
	if err := d.ValidateDelay(24 * time.Hour); err != nil {
		t.Error(err)
	}
	if err := d.ValidateDelay(24*time.Hour + time.Millisecond); err == nil {
		t.Error("ValidateDelay accepted a delay above the largest bucket")
	}
	if got := DelayQueueName("orders", 1500*time.Millisecond); got != "orders.delay.1500" {
		t.Errorf("DelayQueueName = %q", got)
	}

	// A job whose backoff can exceed the largest bucket is refused when it
	// is registered, not when it is settled.
	small, err := NewWorkDriver(WorkConfig{URL: ok.URL, Queue: "orders", FailureQueue: "f",
		DelayBuckets: []time.Duration{time.Second, 10 * time.Second}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	w, err := worker.New(worker.Config{Driver: small, UnknownRetryDelay: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	h := func(context.Context, *worker.Job, *worker.Delivery) error { return nil }
	if err := w.Register(worker.Job{Name: "slow", Handler: h, Backoff: worker.Backoff(time.Second, 2, time.Minute)}); err == nil {
		t.Error("Register accepted a backoff of up to 1 min on 10 s buckets")
	}
	if err := w.Register(worker.Job{Name: "fast", Handler: h, Backoff: worker.Backoff(time.Second, 2, 10*time.Second)}); err != nil {
		t.Errorf("Register refused a backoff within the buckets: %v", err)
	}
	if _, err := worker.New(worker.Config{Driver: small}); err == nil {
		t.Error("worker.New accepted the 30 s unknown-name delay on 10 s buckets")
	}
}

func TestWorkDriverMissingQueueIsReported(t *testing.T) {
	t.Parallel()
	b := newBroker(t)
	d, err := NewWorkDriver(WorkConfig{URL: b.url, Queue: b.name("absent"), FailureQueue: b.name("absent-dlq")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = d.Receive(ctx, 1)
	var qe *quarantine.Error
	if !errors.As(err, &qe) || qe.Field != "queue" || !strings.Contains(qe.Message, "does not exist") {
		t.Fatalf("Receive on a missing queue = %v, want an error naming the queue", err)
	}
}

func TestWorkerRabbitMQSuccessAcks(t *testing.T) {
	t.Parallel()
	f := newWorkFixture(t, nil, nil)
	var mu sync.Mutex
	seen := map[string]*worker.Delivery{}
	job := f.job("charge", func(_ context.Context, _ *worker.Job, d *worker.Delivery) error {
		mu.Lock()
		seen[d.Header(worker.HeaderIdempotencyKey)] = d
		mu.Unlock()
		return nil
	})
	for i := range 5 {
		f.dispatch(&job, fmt.Sprintf("order-%d", i), map[string]int{"n": i})
	}
	stop := f.run(nil, worker.NewMemoryClaims(nil), 0, job)
	f.wait(5, 30*time.Second, result(worker.Completed))
	stop()
	_ = f.drv.Close()
	f.b.waitDepth(f.work, 0) // acked, not merely consumed: a closed consumer would requeue
	if n := f.b.depth(f.failure); n != 0 {
		t.Fatalf("%d messages on the failure queue", n)
	}
	d := seen["order-3"]
	switch {
	case d == nil:
		t.Fatal("order-3 not seen")
	case d.ID == "" || d.JobName != "charge" || d.Queue != f.work || d.ContentType != "application/json":
		t.Errorf("delivery %+v", d)
	case string(d.Body) != `{"n":3}` || d.Headers[worker.HeaderSchemaVersion] != "1" || d.Headers[worker.HeaderJobName] != "charge":
		t.Errorf("body %s headers %v", d.Body, d.Headers)
	case d.EnqueuedAt.IsZero() || time.Since(d.EnqueuedAt) > time.Minute:
		t.Errorf("EnqueuedAt %s", d.EnqueuedAt)
	case d.Attempt != 0:
		t.Errorf("Attempt %d on a classic queue, want 0 (unknown)", d.Attempt)
	}
	if f.count(func(o worker.Outcome) bool { return o.Result != worker.Completed }) != 0 {
		t.Errorf("outcomes other than completed: %+v", f.outcomes)
	}
}

func TestWorkerRabbitMQRetryHonoursTheDelay(t *testing.T) {
	t.Parallel()
	f := newWorkFixture(t, nil, nil)
	var mu sync.Mutex
	runs := map[string][]time.Time{}
	headers := map[string][]map[string]string{}
	h := func(_ context.Context, j *worker.Job, d *worker.Delivery) error {
		k := d.Header(worker.HeaderIdempotencyKey)
		mu.Lock()
		runs[k] = append(runs[k], time.Now())
		headers[k] = append(headers[k], d.Headers)
		n := len(runs[k])
		mu.Unlock()
		if n > 1 {
			return nil
		}
		if j.Name == "throttled" {
			return worker.RetryAfter(errors.New("429 from the API"), 1500*time.Millisecond)
		}
		return errors.New("connection reset")
	}
	flaky := f.job("flaky", h)
	flaky.Backoff = worker.BackoffFunc(func(int) time.Duration { return 700 * time.Millisecond })
	throttled := f.job("throttled", h)
	f.dispatch(&flaky, "flaky-1", map[string]string{"a": "b"})
	f.dispatch(&throttled, "throttled-1", map[string]string{"a": "b"})
	f.run(nil, worker.NewMemoryClaims(nil), 0, flaky, throttled)
	f.wait(2, 30*time.Second, result(worker.Completed))
	retried := f.wait(2, time.Second, result(worker.Retried))

	mu.Lock()
	defer mu.Unlock()
	for key, want := range map[string]time.Duration{"flaky-1": 700 * time.Millisecond, "throttled-1": 1500 * time.Millisecond} {
		r := runs[key]
		if len(r) != 2 {
			t.Fatalf("%s ran %d times, want 2", key, len(r))
		}
		gap := r[1].Sub(r[0])
		if gap < want {
			t.Errorf("%s ran again after %s, before its delay of %s", key, gap, want)
		}
		if gap > want+5*time.Second {
			t.Errorf("%s ran again after %s, long after its delay of %s", key, gap, want)
		}
		t.Logf("%s: delay %s, ran again after %s", key, want, gap)
		second := headers[key][1]
		if second[worker.HeaderAttempts] != "1" || second[worker.HeaderFirstFailedAt] == "" || second[worker.HeaderIdempotencyKey] != key {
			t.Errorf("%s: retry headers %v", key, second)
		}
		for k := range second {
			if brokerHeader(k) {
				t.Errorf("%s: the broker's header %s reached the worker", key, k)
			}
		}
	}
	for _, o := range retried {
		if o.Delay <= 0 {
			t.Errorf("retry outcome %+v has no delay", o)
		}
	}
	// The delay queues exist with the arguments the design says: declaring
	// them again with those arguments is accepted (a mismatch would close
	// the channel with PRECONDITION_FAILED).
	ch, err := f.b.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	for _, b := range []time.Duration{time.Second, 2 * time.Second} {
		q, err := ch.QueueDeclare(DelayQueueName(f.work, b), true, false, false, false, delayArgs(f.work, b))
		if err != nil {
			t.Fatalf("delay queue %s: %v", DelayQueueName(f.work, b), err)
		}
		if q.Messages != 0 {
			t.Errorf("delay queue %s still holds %d messages", q.Name, q.Messages)
		}
	}
	if got := f.drv.usedDelayQueues(); len(got) != 2 {
		t.Errorf("delay queues used: %v, want the 1 s and 2 s buckets", got)
	}
}

func TestWorkerRabbitMQPermanentFailureIsQuarantinedOnce(t *testing.T) {
	t.Parallel()
	f := newWorkFixture(t, nil, nil)
	var ran atomic.Int32
	job := f.job("charge", func(context.Context, *worker.Job, *worker.Delivery) error {
		ran.Add(1)
		return worker.Permanent(errors.New("card number rejected"))
	})
	f.dispatch(&job, "order-7", map[string]string{"card": "0000"})
	stop := f.run(nil, worker.NewMemoryClaims(nil), 0, job)
	f.wait(1, 30*time.Second, result(worker.DeadLettered))
	m := f.failed(1)[0]
	switch {
	case m.JobName != "charge" || m.Queue != f.work || m.IdempotencyKey != "order-7":
		t.Errorf("envelope job %q queue %q key %q", m.JobName, m.Queue, m.IdempotencyKey)
	case m.Attempts != 1 || m.FailureClass != quarantine.ClassPermanent:
		t.Errorf("envelope attempts %d class %q", m.Attempts, m.FailureClass)
	case string(m.Payload) != `{"card":"0000"}` || m.MessageID == "":
		t.Errorf("envelope payload %s id %q", m.Payload, m.MessageID)
	case !strings.Contains(m.Reason, "card number rejected"):
		t.Errorf("reason %q", m.Reason)
	}
	// It never bounces back through the work queue: no copy is left.
	f.quiesce(stop)
	if n := ran.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want 1", n)
	}
	if n := f.b.depth(f.failure); n != 0 {
		t.Errorf("%d more messages on the failure queue", n)
	}
	if n := f.count(func(worker.Outcome) bool { return true }); n != 1 {
		t.Errorf("%d outcomes, want the one dead-letter: %+v", n, f.outcomes)
	}
}

func TestWorkerRabbitMQAttemptCapHolds(t *testing.T) {
	t.Parallel()
	// A quorum work queue: the broker's x-delivery-count is Attempt.
	f := newWorkFixture(t, amqp.Table{"x-queue-type": "quorum"}, nil)
	var ran atomic.Int32
	var attempts sync.Map
	job := f.job("charge", func(_ context.Context, _ *worker.Job, d *worker.Delivery) error {
		n := ran.Add(1)
		attempts.Store(n, d.Header(worker.HeaderAttempts))
		return errors.New("still down")
	})
	job.MaxAttempts = 3
	job.Backoff = worker.BackoffFunc(func(int) time.Duration { return 300 * time.Millisecond })
	f.dispatch(&job, "order-9", "{}")
	stop := f.run(nil, worker.NewMemoryClaims(nil), 0, job)
	dl := f.wait(1, 30*time.Second, result(worker.DeadLettered))[0]
	m := f.failed(1)[0]
	if m.Attempts != 3 || m.FailureClass != quarantine.ClassExhausted || m.IdempotencyKey != "order-9" {
		t.Errorf("envelope attempts %d class %q key %q", m.Attempts, m.FailureClass, m.IdempotencyKey)
	}
	if dl.Attempt != 3 || dl.Class != string(quarantine.ClassExhausted) {
		t.Errorf("dead-letter outcome %+v", dl)
	}
	f.quiesce(stop) // no copy is left to make a fourth attempt
	if n := ran.Load(); n != 3 {
		t.Errorf("the handler ran %d times, want the cap of 3", n)
	}
	if n := f.count(result(worker.Retried)); n != 2 {
		t.Errorf("%d retries, want 2", n)
	}
	for i, want := range []string{"", "1", "2"} {
		if got, _ := attempts.Load(int32(i + 1)); got != want {
			t.Errorf("run %d saw x-quarantine-attempts %q, want %q", i+1, got, want)
		}
	}
}

func TestWorkerRabbitMQDuplicateOfACompletedKeyIsAcked(t *testing.T) {
	t.Parallel()
	f := newWorkFixture(t, nil, nil)
	var ran atomic.Int32
	job := f.job("charge", func(context.Context, *worker.Job, *worker.Delivery) error {
		ran.Add(1)
		return nil
	})
	job.Concurrency = 1
	f.dispatch(&job, "order-1", "{}")
	f.dispatch(&job, "order-1", "{}") // the producer retried its Dispatch
	stop := f.run(nil, worker.NewMemoryClaims(nil), 0, job)
	f.wait(1, 30*time.Second, result(worker.Completed))
	dup := f.wait(1, 30*time.Second, result(worker.Duplicate))[0]
	if dup.Ran || dup.Key != "order-1" {
		t.Errorf("duplicate outcome %+v", dup)
	}
	stop()
	_ = f.drv.Close()
	f.b.waitDepth(f.work, 0)
	if n := ran.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want 1", n)
	}
}

func TestWorkerRabbitMQConnectionLossRedeliversOneEffect(t *testing.T) {
	t.Parallel()
	f := newWorkFixture(t, nil, nil)
	claims, err := sqliteclaims.Open(context.Background(), filepath.Join(t.TempDir(), "claims.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = claims.Close() })
	var effects atomic.Int32
	started := make(chan struct{}, 10)
	release := make(chan struct{})
	job := f.job("charge", func(context.Context, *worker.Job, *worker.Delivery) error {
		started <- struct{}{}
		<-release
		effects.Add(1) // the business effect, done once the handler is let go
		return nil
	})
	f.dispatch(&job, "order-5", "{}")
	stop := f.run(nil, claims, 3*time.Second, job)
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the handler did not start")
	}
	// Kill the consumer's connection mid-handler: the delivery goes back
	// to the queue and its tag is void.
	f.drv.mu.Lock()
	_ = f.drv.sess.conn.Close()
	f.drv.mu.Unlock()
	close(release)
	// The first run recorded its effect and failed to ack; the redelivery
	// (on the new connection) finds the key done, or held and retries it
	// until the lease ends, and is acked without running again.
	f.wait(1, 30*time.Second, result(worker.Duplicate))
	f.quiesce(stop) // no copy is left to run the effect again
	if n := effects.Load(); n != 1 {
		t.Errorf("%d business effects, want 1", n)
	}
	if n := f.count(result(worker.Completed)); n != 0 {
		t.Errorf("%d completions reported for a delivery whose ack was lost", n)
	}
	v, err := claims.Violations(context.Background())
	if err != nil || len(v) != 0 {
		t.Fatalf("proof query: %v %v", v, err)
	}
	if c, err := claims.Claim(context.Background(), "order-5", "probe", time.Second); err != nil || c.Status != worker.AlreadyDone {
		t.Errorf("claim of order-5 = %+v, %v; want done", c, err)
	}
	_ = f.drv.Close()
	f.b.waitDepth(f.work, 0)
}

func TestWorkDriverSettlingALostDeliveryFails(t *testing.T) {
	t.Parallel()
	// A quorum queue counts the redelivery: x-delivery-count is Attempt.
	f := newWorkFixture(t, amqp.Table{"x-queue-type": "quorum"}, nil)
	job := f.job("charge", func(context.Context, *worker.Job, *worker.Delivery) error { return nil })
	f.dispatch(&job, "order-2", "{}")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ds, err := f.drv.Receive(ctx, 10)
	if err != nil || len(ds) != 1 {
		t.Fatalf("Receive = %d, %v", len(ds), err)
	}
	old := ds[0]
	f.drv.mu.Lock()
	_ = f.drv.sess.conn.Close()
	f.drv.mu.Unlock()
	for name, err := range map[string]error{
		"Ack": f.drv.Ack(ctx, old), "Retry": f.drv.Retry(ctx, old, time.Second), "Reject": f.drv.Reject(ctx, old),
		"DeadLetter": f.drv.DeadLetter(ctx, old, []byte("{}")), "Extend": f.drv.Extend(ctx, old),
	} {
		if !errors.Is(err, ErrChannelLost) {
			t.Errorf("%s of a delivery of a lost channel = %v, want ErrChannelLost", name, err)
		}
	}
	// Receive reports the loss, then dials again and gets the redelivery.
	var again []*worker.Delivery
	for again == nil {
		ds, err := f.drv.Receive(ctx, 10)
		if err != nil {
			if ctx.Err() != nil {
				t.Fatal(err)
			}
			continue
		}
		again = ds
	}
	if again[0].ID != old.ID {
		t.Fatalf("redelivered %q, want %q", again[0].ID, old.ID)
	}
	if old.Attempt > 1 || again[0].Attempt != 2 {
		t.Errorf("attempts %d then %d, want at most 1 then 2 (x-delivery-count 1)", old.Attempt, again[0].Attempt)
	}
	if _, ok := again[0].Headers["x-delivery-count"]; ok {
		t.Error("x-delivery-count reached the worker's headers")
	}
	if err := f.drv.Reject(ctx, again[0]); err != nil {
		t.Fatal(err)
	}
	if n := f.b.depth(f.failure) + f.b.depth(f.work); n != 0 {
		t.Errorf("%d messages left after a reject without a dead-letter exchange", n)
	}
	if got := f.drv.usedDelayQueues(); len(got) != 0 {
		t.Errorf("a refused retry published to %v", got)
	}
}

func TestWorkDriverRejectFollowsTheQueuePolicy(t *testing.T) {
	t.Parallel()
	b := newBroker(t)
	dlx := b.failureQueue(nil)
	f := &workFixture{t: t, b: b, changed: make(chan struct{})}
	f.failure = b.failureQueue(nil)
	f.work = b.workQueue(dlx, nil) // dead-letters into dlx
	f.drv = f.driver(nil)
	job := f.job("charge", func(context.Context, *worker.Job, *worker.Delivery) error {
		return worker.Reject(errors.New("not mine"))
	})
	f.dispatch(&job, "order-3", "{}")
	f.run(nil, nil, 0, job)
	f.wait(1, 30*time.Second, result(worker.Rejected))
	b.waitDepth(dlx, 1)
	if n := b.depth(f.failure); n != 0 {
		t.Errorf("a rejection wrote %d envelopes", n)
	}
}

func TestWorkDriverDeadLetterUnconfirmedDoesNotAck(t *testing.T) {
	t.Parallel()
	f := newWorkFixture(t, nil, func(c *WorkConfig) { c.RequeueAfter = 200 * time.Millisecond })
	job := f.job("charge", nil)
	f.dispatch(&job, "order-4", "{}")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ds, err := f.drv.Receive(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	// The failure queue disappears: the mandatory publish comes back.
	f.b.mu.Lock()
	_, err = f.b.ch.QueueDelete(f.failure, false, false, false)
	f.b.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = f.drv.DeadLetter(ctx, ds[0], []byte(`{"envelope":"quarantine.failure/v1"}`))
	var qe *quarantine.Error
	if !errors.As(err, &qe) || qe.Code != quarantine.ENOTFOUND {
		t.Fatalf("DeadLetter to a missing failure queue = %v, want ENOTFOUND", err)
	}
	// Not acked: it goes back to the queue after RequeueAfter, and is
	// delivered again.
	again, err := f.drv.Receive(ctx, 1)
	if err != nil || again[0].ID != ds[0].ID {
		t.Fatalf("Receive after the refused dead letter = %v, %v; want the redelivery", again, err)
	}
	if waited := time.Since(start); waited < 200*time.Millisecond {
		t.Errorf("requeued after %s, before RequeueAfter", waited)
	}
}

// TestWorkerRabbitMQQuarantineEditReplay is the loop end to end on the
// real broker: a job that fails permanently ends in the quarantine with
// the right envelope; after an edit and a replay the worker completes it
// once, with the edited payload and the original idempotency key.
func TestWorkerRabbitMQQuarantineEditReplay(t *testing.T) {
	t.Parallel()
	f := newWorkFixture(t, nil, nil)
	type report struct {
		Account string `json:"account"`
		Month   string `json:"month"`
	}
	var mu sync.Mutex
	var runs []string // the payloads the handler saw
	var done []string // keys completed (the business effect)
	job := f.job("build-report", worker.JSON(func(_ context.Context, d *worker.Delivery, r report) error {
		mu.Lock()
		defer mu.Unlock()
		runs = append(runs, string(d.Body))
		if _, err := time.Parse("2006-01", r.Month); err != nil {
			return worker.Permanent(fmt.Errorf("month %q is not YYYY-MM", r.Month))
		}
		done = append(done, d.Header(worker.HeaderIdempotencyKey))
		return nil
	}))
	job.Name = "build-report"
	claims := worker.NewMemoryClaims(nil)
	stop := f.run(nil, claims, 0, job)
	f.dispatch(&job, "report-acme-2026-11", report{Account: "acme", Month: "November"})
	f.wait(1, 30*time.Second, result(worker.DeadLettered))

	// The collector drains the failure queue into the quarantine.
	st := testStore(t)
	src := testSource(t, "rmq", f.failure, nil)
	c, stopCollector := runCollector(t, "rmq", src, st, 10)
	waitStored(t, c, 1, 30*time.Second)
	stopCollector()
	msgs := stored(t, st, "rmq")
	if len(msgs) != 1 {
		t.Fatalf("%d messages stored, want 1", len(msgs))
	}
	m, err := st.GetMessage(context.Background(), msgs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case m.JobName != "build-report" || m.Queue != f.work || m.IdempotencyKey != "report-acme-2026-11":
		t.Fatalf("quarantined job %q queue %q key %q", m.JobName, m.Queue, m.IdempotencyKey)
	case m.FailureClass != quarantine.ClassPermanent || m.Attempts != 1 || !strings.Contains(m.Reason, "YYYY-MM"):
		t.Fatalf("quarantined class %q attempts %d reason %q", m.FailureClass, m.Attempts, m.Reason)
	case string(m.Payload) != `{"account":"acme","month":"November"}`:
		t.Fatalf("quarantined payload %s", m.Payload)
	}

	// The operator fixes the payload and replays it.
	ctx := context.Background()
	fixed := []byte(`{"account":"acme","month":"2026-11"}`)
	if _, err := st.EditPayload(ctx, quarantine.PayloadEdit{MessageID: m.ID, IfMatch: m.PayloadSHA256, Payload: fixed,
		Reason: "month in YYYY-MM", Actor: "token:alice"}); err != nil {
		t.Fatal(err)
	}
	req := quarantine.ReplayRequest{IDs: []string{m.ID}, Rate: 100, Reason: "payload fixed", Actor: "token:alice"}
	if err := req.Validate(0); err != nil {
		t.Fatal(err)
	}
	batch, err := st.CreateReplay(ctx, req, nil)
	if err != nil {
		t.Fatal(err)
	}
	pub := NewPublisher(Config{URL: f.b.url}, "rmq", testLogger(t))
	t.Cleanup(func() { _ = pub.Close() })
	engine := replay.New(replay.Config{Store: st, Poll: 20 * time.Millisecond, Logger: testLogger(t),
		Router: &replay.Routes{Brokers: map[string]replay.Broker{"rmq": {Name: "rmq", Kind: "rabbitmq", Publisher: pub}}}})
	ectx, cancel := context.WithCancel(ctx)
	engineDone := make(chan struct{})
	go func() { defer close(engineDone); _ = engine.Run(ectx) }()
	t.Cleanup(func() { cancel(); <-engineDone })

	completed := f.wait(1, 30*time.Second, result(worker.Completed))[0]
	if completed.Key != "report-acme-2026-11" {
		t.Errorf("completed key %q", completed.Key)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := st.GetReplay(ctx, batch.ID)
		if err != nil {
			t.Fatal(err)
		}
		if b.State == quarantine.ReplayCompleted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replay %s is %s (%+v)", b.ID, b.State, b.Counts)
		}
		time.Sleep(20 * time.Millisecond)
	}
	f.quiesce(stop) // no copy is left to complete the job again
	mu.Lock()
	defer mu.Unlock()
	if len(done) != 1 || done[0] != "report-acme-2026-11" {
		t.Errorf("completed keys %v, want report-acme-2026-11 once", done)
	}
	if len(runs) != 2 || runs[1] != string(fixed) {
		t.Errorf("the handler saw %q, want the original then the edited payload", runs)
	}
	if !claims.Done("report-acme-2026-11") {
		t.Error("the key is not done in the claims")
	}
	if v, _ := claims.Violations(ctx); len(v) != 0 {
		t.Errorf("proof: %v", v)
	}
	if n := f.b.depth(f.failure); n != 0 {
		t.Errorf("%d messages on the failure queue after the replay", n)
	}
	if n := f.count(result(worker.DeadLettered)); n != 1 {
		t.Errorf("%d dead-letters, want the first one only", n)
	}
}

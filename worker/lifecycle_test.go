package worker_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/broker/memory"
	"github.com/quarantine-dev/quarantine/replay"
	"github.com/quarantine-dev/quarantine/worker"
)

// At shutdown a handler returning its context's error is retried with
// zero delay, not counted as an attempt, its claim released.
func TestShutdownRetriesCancelledHandlerWithZeroDelay(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	started := make(chan struct{})
	stop := e.start(worker.Job{Name: "j", MaxAttempts: 1, Handler: func(ctx context.Context, _ *worker.Job, _ *worker.Delivery) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	}})
	e.put("m1", "j", "k1", "{}")
	<-started
	if err := stop(); err != nil {
		t.Fatalf("Run = %v, want a clean drain", err)
	}
	o := e.expect(worker.Retried, "shutdown")
	if o.Delay != 0 {
		t.Fatalf("delay %s, want 0", o.Delay)
	}
	waiting := e.q.Waiting()
	if len(waiting) != 1 || !waiting[0].ReadyAt.Equal(e.clk.Now()) || waiting[0].Headers[worker.HeaderAttempts] != "0" {
		t.Fatalf("waiting = %+v, want the job ready now with 0 attempts done", waiting)
	}
	if len(e.q.Failed()) != 0 {
		t.Fatal("MaxAttempts 1: a shutdown must not count as the attempt")
	}
	if c, _ := e.claims.Claim(context.Background(), "k1", "next", time.Minute); c.Status != worker.Claimed {
		t.Fatalf("after shutdown the key is %v, want free", c.Status)
	}
}

// A handler that finishes within the drain deadline is acked.
func TestDrainLetsInFlightHandlersFinish(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withConfig(func(c *worker.Config) { c.DrainTimeout = 5 * time.Second }))
	started := make(chan struct{})
	stop := e.start(worker.Job{Name: "j", Handler: func(ctx context.Context, _ *worker.Job, _ *worker.Delivery) error {
		close(started)
		time.Sleep(30 * time.Millisecond)
		return ctx.Err() // nil: the context is not cancelled during the drain
	}})
	e.put("m1", "j", "k1", "{}")
	<-started
	if err := stop(); err != nil {
		t.Fatalf("Run = %v", err)
	}
	e.expect(worker.Completed, "")
	if len(e.q.Acked()) != 1 {
		t.Fatal("not acked")
	}
}

// A handler ignoring cancellation past the drain deadline is abandoned:
// its delivery stays unacknowledged and nothing is settled later.
func TestDrainDeadlineLeavesUnfinishedWorkUnacknowledged(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withConfig(func(c *worker.Config) {
		c.DrainTimeout, c.SettleTimeout = 10*time.Millisecond, 20*time.Millisecond
	}))
	started, release := make(chan struct{}), make(chan struct{})
	stop := e.start(worker.Job{Name: "j", Handler: func(context.Context, *worker.Job, *worker.Delivery) error {
		close(started)
		<-release
		return nil
	}})
	e.put("m1", "j", "k1", "{}")
	<-started
	err := stop()
	if err == nil || !strings.Contains(err.Error(), "1 deliveries") {
		t.Fatalf("Run = %v, want 1 delivery left unacknowledged", err)
	}
	close(release)
	e.quiet(30 * time.Millisecond)
	if w, f := e.q.Len(); w != 0 || f != 1 || len(e.q.Acked()) != 0 {
		t.Fatalf("%d waiting, %d in flight, %d acked; want the job in flight, unacked", w, f, len(e.q.Acked()))
	}
	// Its effect finished, so the record is kept: the redelivery is a duplicate.
	if !e.claims.Done("k1") {
		t.Fatal("the finished effect was not recorded")
	}
}

func TestPanicIsAnOrdinaryErrorWithStack(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start(worker.Job{Name: "j", MaxAttempts: 2, Handler: func(context.Context, *worker.Job, *worker.Delivery) error {
		panic("kaboom")
	}})
	e.put("m1", "j", "k1", "{}")
	o := e.expect(worker.Retried, "panic")
	var pe *worker.PanicError
	if !errors.As(o.Err, &pe) || pe.Value != "kaboom" || !strings.Contains(string(pe.Stack), "lifecycle_test.go") {
		t.Fatalf("err = %v, want a PanicError with the handler's stack", o.Err)
	}
	e.clk.Advance(time.Hour)
	e.expect(worker.DeadLettered, "exhausted")
	if m := decode(t, e.q.Failed()[0].Envelope); !strings.Contains(m.Reason, "panic: kaboom") || len(m.Reason) > 1024 {
		t.Fatalf("reason %q", m.Reason)
	}
}

func TestTimeoutIsACooperativeDeadline(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start(worker.Job{Name: "j", Timeout: 20 * time.Millisecond, Handler: func(ctx context.Context, _ *worker.Job, _ *worker.Delivery) error {
		<-ctx.Done()
		return ctx.Err()
	}})
	e.put("m1", "j", "k1", "{}")
	if o := e.expect(worker.Retried, "timeout"); !errors.Is(o.Err, context.DeadlineExceeded) {
		t.Fatalf("err %v", o.Err)
	}
}

func TestConcurrencyPerJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var now, peak atomic.Int32
	job := func(name string, n int) worker.Job {
		return worker.Job{Name: name, Concurrency: n, Handler: func(context.Context, *worker.Job, *worker.Delivery) error {
			c := now.Add(1)
			for p := peak.Load(); c > p && !peak.CompareAndSwap(p, c); p = peak.Load() {
			}
			time.Sleep(15 * time.Millisecond)
			now.Add(-1)
			return nil
		}}
	}
	e.start(job("two", 2))
	for i := range 8 {
		e.put("m"+string(rune('a'+i)), "two", "k"+string(rune('a'+i)), "{}")
	}
	for range 8 {
		e.expect(worker.Completed, "")
	}
	if p := peak.Load(); p != 2 {
		t.Fatalf("peak concurrency %d, want 2", p)
	}
}

func TestRejectLeavesItToTheBackend(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start(worker.Job{Name: "j", Handler: func(context.Context, *worker.Job, *worker.Delivery) error {
		return worker.Reject(errBoom)
	}})
	e.put("m1", "j", "k1", "{}")
	e.expect(worker.Rejected, "")
	if len(e.q.Rejected()) != 1 || len(e.q.Failed()) != 0 {
		t.Fatalf("%d rejected, %d failed; want 1, 0 (no envelope for a reject)", len(e.q.Rejected()), len(e.q.Failed()))
	}
	if e.claims.Done("k1") {
		t.Fatal("a rejected key was completed")
	}
}

// renewCounter counts driver lease renewals.
type renewCounter struct {
	worker.Driver
	n atomic.Int32
}

func (r *renewCounter) Extend(ctx context.Context, d *worker.Delivery) error {
	r.n.Add(1)
	return r.Driver.Extend(ctx, d)
}

func TestLongHandlerRenewsLeases(t *testing.T) {
	t.Parallel()
	var rc *renewCounter
	e := newEnv(t,
		withQueue(memory.WorkQueueOptions{Limits: worker.Limits{RenewEvery: 10 * time.Millisecond}}),
		withDriver(func(d worker.Driver) worker.Driver { rc = &renewCounter{Driver: d}; return rc }),
		withConfig(func(c *worker.Config) { c.ClaimLease = 20 * time.Millisecond }))
	e.start(worker.Job{Name: "j", Handler: func(context.Context, *worker.Job, *worker.Delivery) error {
		time.Sleep(120 * time.Millisecond)
		return nil
	}})
	e.put("m1", "j", "k1", "{}")
	e.expect(worker.Completed, "")
	if n := rc.n.Load(); n < 5 {
		t.Fatalf("%d driver renewals in 120ms every 10ms, want >= 5", n)
	}
	if n := e.claims.extends.Load(); n < 5 {
		t.Fatalf("%d claim renewals in 120ms every 10ms (half the lease), want >= 5", n)
	}
}

// validatingDriver accepts delays up to one hour only, as a RabbitMQ
// driver with fixed delay buckets would.
type validatingDriver struct{ worker.Driver }

func (validatingDriver) ValidateDelay(d time.Duration) error {
	if d > time.Hour {
		return errors.New("no delay bucket above 1h")
	}
	return nil
}

func TestRegisterValidatesDelaysPerDriver(t *testing.T) {
	t.Parallel()
	sqsLike := worker.Limits{MaxDelay: 12 * time.Hour, DelayStep: time.Second}
	h := func(context.Context, *worker.Job, *worker.Delivery) error { return nil }
	cases := []struct {
		name    string
		job     worker.Job
		bucket  bool
		wantErr string
	}{
		{"backoff max above the driver's", worker.Job{Name: "a", Backoff: worker.Backoff(time.Second, 2, 24*time.Hour), Handler: h}, false, "exceeds the driver's maximum of 12h0m0s"},
		{"no max and no cap", worker.Job{Name: "a", Backoff: worker.Backoff(time.Second, 2, 0), Handler: h}, false, "set a max"},
		{"no max but a cap keeps it small", worker.Job{Name: "a", MaxAttempts: 10, Backoff: worker.Backoff(time.Second, 2, 0), Handler: h}, false, ""},
		{"no max, cap too high", worker.Job{Name: "a", MaxAttempts: 20, Backoff: worker.Backoff(time.Second, 2, 0), Handler: h}, false, "exceeds"},
		{"fits", worker.Job{Name: "a", Backoff: worker.Backoff(time.Second, 2, time.Hour), Handler: h}, false, ""},
		{"default backoff", worker.Job{Name: "a", Handler: h}, false, ""},
		{"func above the max", worker.Job{Name: "a", MaxAttempts: 3, Backoff: worker.BackoffFunc(func(n int) time.Duration { return time.Duration(n) * 7 * time.Hour }), Handler: h}, false, "exceeds"},
		{"bucket refused", worker.Job{Name: "a", Backoff: worker.Backoff(time.Second, 2, 2*time.Hour), Handler: h}, true, "no delay bucket above 1h"},
		{"bucket fits", worker.Job{Name: "a", Backoff: worker.Backoff(time.Second, 2, time.Hour), Handler: h}, true, ""},
		{"no name", worker.Job{Handler: h}, false, "no name"},
		{"no handler", worker.Job{Name: "a"}, false, "no handler"},
		{"negative cap", worker.Job{Name: "a", MaxAttempts: -1, Handler: h}, false, "negative"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var d worker.Driver = memory.NewWorkQueue("work", memory.WorkQueueOptions{Limits: sqsLike})
			if c.bucket {
				d = validatingDriver{d}
			}
			w, err := worker.New(worker.Config{Driver: d})
			if err != nil {
				t.Fatal(err)
			}
			err = w.Register(c.job)
			if c.wantErr == "" && err != nil || c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
				t.Fatalf("Register = %v, want %q", err, c.wantErr)
			}
		})
	}
	t.Run("duplicate name", func(t *testing.T) {
		w, _ := worker.New(worker.Config{Driver: memory.NewWorkQueue("w", memory.WorkQueueOptions{})})
		_ = w.Register(worker.Job{Name: "a", Handler: h})
		if err := w.Register(worker.Job{Name: "a", Handler: h}); err == nil {
			t.Fatal("registered a name twice")
		}
	})
	t.Run("unknown-name delay above the driver's", func(t *testing.T) {
		d := memory.NewWorkQueue("w", memory.WorkQueueOptions{Limits: worker.Limits{MaxDelay: 10 * time.Second}})
		if _, err := worker.New(worker.Config{Driver: d}); err == nil || !strings.Contains(err.Error(), "unknown job names") {
			t.Fatalf("New = %v, want the 30s unknown-name delay refused", err)
		}
	})
}

// Runtime delays are rounded up to the driver's step and clamped to its
// maximum (a RetryAfter can ask for anything).
func TestDelaysRoundedAndClampedToDriver(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withQueue(memory.WorkQueueOptions{Limits: worker.Limits{MaxDelay: 12 * time.Hour, DelayStep: time.Second}}))
	var n atomic.Int32
	e.start(worker.Job{Name: "j", Backoff: worker.Backoff(time.Second, 1, time.Second), Handler: func(context.Context, *worker.Job, *worker.Delivery) error {
		if n.Add(1) == 1 {
			return worker.RetryAfter(errBoom, 1500*time.Millisecond)
		}
		return worker.RetryAfter(errBoom, 20*time.Hour)
	}})
	e.put("m1", "j", "k1", "{}")
	if o := e.expect(worker.Retried, "retry_after"); o.Delay != 2*time.Second {
		t.Fatalf("delay %s, want 2s (rounded up to the step)", o.Delay)
	}
	e.idle()
	e.clk.Advance(2 * time.Second)
	if o := e.expect(worker.Retried, "retry_after"); o.Delay != 12*time.Hour {
		t.Fatalf("delay %s, want 12h (the driver's max)", o.Delay)
	}
}

func TestSchemaVersionCurrentPreviousOrNone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start(worker.Job{Name: "j", SchemaVersion: "2", PreviousVersion: "1", Handler: func(context.Context, *worker.Job, *worker.Delivery) error { return nil }})
	for _, c := range []struct {
		version string
		want    worker.Result
	}{{"2", worker.Completed}, {"1", worker.Completed}, {"", worker.Completed}, {"3", worker.DeadLettered}, {"0", worker.DeadLettered}} {
		h := map[string]string{worker.HeaderJobName: "j", worker.HeaderIdempotencyKey: "k" + c.version}
		if c.version != "" {
			h[worker.HeaderSchemaVersion] = c.version
		}
		e.q.Put(memory.Job{ID: "m" + c.version, Headers: h, Body: []byte("{}")})
		if o := e.next(); o.Result != c.want {
			t.Fatalf("version %q: %v, want %v", c.version, o.Result, c.want)
		}
	}
	m := decode(t, e.q.Failed()[0].Envelope)
	if m.FailureClass != quarantine.ClassPermanent || m.SchemaVersion != "3" || !strings.Contains(m.Reason, "schema version") {
		t.Fatalf("envelope %+v", m)
	}
}

// Outcome hooks and metrics follow only settlements the backend accepted.
func TestOutcomeOnlyAfterTheBackendAccepted(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	metrics := worker.NewMetrics(reg)
	e := newEnv(t, withConfig(func(c *worker.Config) { c.Metrics = metrics }))
	e.drv.failAck.Store(true)
	e.start(worker.Job{Name: "j", Handler: func(_ context.Context, _ *worker.Job, d *worker.Delivery) error {
		e.effect(d.Header(worker.HeaderIdempotencyKey))
		return nil
	}})
	e.put("m1", "j", "k1", "{}")
	e.idle()
	e.quiet(20 * time.Millisecond)
	if got := testutil.ToFloat64(metrics.Completions("j")); got != 0 {
		t.Fatalf("completions %v after a refused ack, want 0", got)
	}
	e.drv.failAck.Store(false)
	e.q.Crash() // the unacked delivery comes back
	e.expect(worker.Duplicate, "")
	if got := testutil.ToFloat64(metrics.Conflicts("j")); got != 1 || e.effectsOf("k1") != 1 {
		t.Fatalf("claim conflicts %v, effects %d; want 1, 1", got, e.effectsOf("k1"))
	}
}

func TestMetricsBoundedLabels(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	e := newEnv(t, withConfig(func(c *worker.Config) { c.Metrics = worker.NewMetrics(reg); c.UnknownMaxDeliveries = 1 }))
	var n atomic.Int32
	e.start(worker.Job{Name: "j", MaxAttempts: 2, Backoff: worker.Backoff(0, 1, 0), Handler: func(context.Context, *worker.Job, *worker.Delivery) error {
		if n.Add(1) == 1 {
			return errBoom
		}
		return nil
	}})
	e.put("m1", "j", "k1", "{}")
	e.expect(worker.Retried, "error")
	e.expect(worker.Completed, "")
	e.put("m2", "j", "k1", "{}")
	e.expect(worker.Duplicate, "")
	e.put("m3", "hostile-name-"+strings.Repeat("x", 100), "k3", "{}")
	e.expect(worker.DeadLettered, "unknown_name")
	want := `
# HELP quarantine_worker_completions_total Jobs completed and acknowledged.
# TYPE quarantine_worker_completions_total counter
quarantine_worker_completions_total{job="j"} 1
# HELP quarantine_worker_claim_conflicts_total Duplicate deliveries of a completed idempotency key, acknowledged without running.
# TYPE quarantine_worker_claim_conflicts_total counter
quarantine_worker_claim_conflicts_total{job="j"} 1
# HELP quarantine_worker_retries_total Deliveries settled for a later retry, by class.
# TYPE quarantine_worker_retries_total counter
quarantine_worker_retries_total{class="error",job="j"} 1
# HELP quarantine_worker_redeliveries_total Deliveries whose attempt is above 1.
# TYPE quarantine_worker_redeliveries_total counter
quarantine_worker_redeliveries_total{job="j"} 1
# HELP quarantine_worker_dead_letters_total Deliveries dead-lettered with a failure envelope, by class.
# TYPE quarantine_worker_dead_letters_total counter
quarantine_worker_dead_letters_total{class="unknown_name",job="unknown"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"quarantine_worker_completions_total", "quarantine_worker_claim_conflicts_total", "quarantine_worker_retries_total",
		"quarantine_worker_redeliveries_total", "quarantine_worker_dead_letters_total"); err != nil {
		t.Fatal(err)
	}
	if c := testutil.CollectAndCount(reg, "quarantine_worker_handler_seconds"); c != 1 {
		t.Fatalf("%d handler latency series, want 1 (job j)", c)
	}
}

func TestDispatchRequiresKeyAndVersion(t *testing.T) {
	t.Parallel()
	q := memory.NewWorkQueue("work", memory.WorkQueueOptions{})
	job := &worker.Job{Name: "report", Queue: "work", SchemaVersion: "1"}
	for _, c := range []struct {
		name string
		job  *worker.Job
		key  string
	}{
		{"no key", job, ""},
		{"no version", &worker.Job{Name: "report", Queue: "work"}, "k"},
		{"no queue", &worker.Job{Name: "report", SchemaVersion: "1"}, "k"},
		{"no job", nil, "k"},
	} {
		err := worker.Dispatch(context.Background(), q, c.job, c.key, map[string]int{"a": 1}, nil)
		if quarantine.ErrorCode(err) != quarantine.EINVALID {
			t.Errorf("%s: Dispatch = %v, want EINVALID", c.name, err)
		}
	}
	if err := worker.Dispatch(context.Background(), q, job, "k", func() {}, nil); quarantine.ErrorCode(err) != quarantine.EINVALID {
		t.Errorf("unencodable payload: %v", err)
	}
	if w, _ := q.Len(); w != 0 {
		t.Fatalf("%d messages sent by refused dispatches", w)
	}
}

// Dispatch and the replay engine produce the same wire shape, and the
// worker consumes both.
func TestDispatchAndReplayShareTheWireFormat(t *testing.T) {
	t.Parallel()
	if worker.HeaderIdempotencyKey != replay.HeaderIdempotencyKey || worker.HeaderJobName != replay.HeaderJobName ||
		worker.HeaderReplayID != replay.HeaderReplayID || worker.HeaderOriginalID != replay.HeaderOriginalID {
		t.Fatal("the worker's header names differ from the replay engine's")
	}
	e := newEnv(t)
	b := memory.New("work")
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	e.q.FeedFrom(ctx, b, "work")
	type report struct {
		Pages int `json:"pages"`
	}
	job := worker.Job{Name: "report", Queue: "work", SchemaVersion: "1", MaxAttempts: 1,
		Handler: worker.JSON(func(_ context.Context, d *worker.Delivery, r report) error {
			if r.Pages < 0 {
				return worker.Permanent(errors.New("negative page count"))
			}
			e.effect(d.Header(worker.HeaderIdempotencyKey))
			return nil
		})}
	e.start(job)

	if err := worker.Dispatch(context.Background(), e.q, &job, "order-7", report{Pages: -1}, &worker.DispatchOptions{Now: e.clk.Now}); err != nil {
		t.Fatal(err)
	}
	e.expect(worker.DeadLettered, "permanent")
	env := e.q.Failed()[0].Envelope
	m := decode(t, env)
	if m.IdempotencyKey != "order-7" || m.SchemaVersion != "1" || m.EnqueuedAt == nil || !m.EnqueuedAt.Equal(e.clk.Now()) ||
		m.Reason != "negative page count" || string(m.Payload) != `{"pages":-1}` {
		t.Fatalf("envelope job %+v", m)
	}

	// The operator fixes the payload and replays it: the replay engine's
	// own Prepare builds the message, published on the memory Broker.
	m.ID, m.Payload = "01JQUARANTINEID", []byte(`{"pages":3}`)
	out, _ := replay.Prepare(&quarantine.ReplayBatch{ID: "batch-1", Actor: "alice"}, quarantine.ReplayLease{Message: m}, "work")
	for range 2 { // published twice (a crash between publish and record)
		if res := b.Publish(context.Background(), []replay.Outgoing{out}); res[0].Err != nil {
			t.Fatal(res[0].Err)
		}
	}
	o := e.expect(worker.Completed, "")
	if o.Key != "order-7" || o.Attempt != 1 {
		t.Fatalf("replay outcome %+v", o)
	}
	e.expect(worker.Duplicate, "")
	if n := e.effectsOf("order-7"); n != 1 {
		t.Fatalf("%d effects, want 1", n)
	}
}

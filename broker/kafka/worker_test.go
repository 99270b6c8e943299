package kafka

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
	"github.com/quarantine-dev/quarantine/internal/brokertest"
	"github.com/quarantine-dev/quarantine/worker"
)

// workEnv is a cluster with a work topic, its retry topic and a failure
// topic.
type workEnv struct {
	t *testing.T
	k *cluster
}

const (
	workTopic    = "reports"
	retryTopic   = "reports.retry"
	failureTopic = "reports.failed"
)

func newWorkEnv(t *testing.T) *workEnv {
	return &workEnv{t: t, k: newCluster(t, 2, workTopic, retryTopic, failureTopic)}
}

func (e *workEnv) config() WorkConfig {
	return WorkConfig{Brokers: e.k.addrs, Name: e.t.Name(), Topic: workTopic, FailureTopic: failureTopic}
}

func (e *workEnv) driver() *WorkDriver {
	e.t.Helper()
	d, err := NewWorkDriver(e.config(), quietLogger())
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = d.Close() })
	return d
}

// drained: the group committed the work and retry topics to their end.
func (e *workEnv) drained() bool {
	g := "worker-" + workTopic
	return e.k.committedLag(g, workTopic) == 0 && e.k.committedLag(g, retryTopic) == 0
}

// failures decodes the n envelopes of the failure topic.
func (e *workEnv) failures(n int) []*quarantine.Message {
	e.t.Helper()
	var out []*quarantine.Message
	for _, r := range e.k.consume(failureTopic, n) {
		m, problems := collect.DecodeEnvelope(r.Value, collect.Origin{Source: "test", Kind: quarantine.SourceKafka})
		if len(problems) > 0 {
			e.t.Fatalf("the failure envelope does not decode: %+v\n%s", problems, r.Value)
		}
		out = append(out, m)
	}
	return out
}

func reportJob(h worker.Handler) worker.Job {
	return worker.Job{Name: "build-report", Queue: workTopic, SchemaVersion: "1", Concurrency: 2,
		Backoff: worker.BackoffFunc(func(int) time.Duration { return 100 * time.Millisecond }), Handler: h}
}

// A job completes once, its claim is done, and the offsets are committed.
func TestWorkerOverKafkaCompletes(t *testing.T) {
	t.Parallel()
	e := newWorkEnv(t)
	d := e.driver()
	x := brokertest.NewRuns()
	job := reportJob(func(_ context.Context, _ *worker.Job, d *worker.Delivery) error {
		x.Ran()
		x.Effect(d)
		return nil
	})
	claims := worker.NewMemoryClaims(nil)
	r := brokertest.StartWorker(t, d, claims, job)
	brokertest.Dispatch(t, d, &job, "report-1", `{"n":1}`)
	eventually(t, 10*time.Second, "completion", func() bool { return r.Count(worker.Completed) == 1 })
	eventually(t, 10*time.Second, "offsets committed", e.drained)
	if x.Effects("report-1") != 1 || !claims.Done("report-1") {
		t.Fatalf("effects %d, claim done %v", x.Effects("report-1"), claims.Done("report-1"))
	}
}

// A RetryAfter is retried through the retry topic after its delay, not
// before, with the worker's attempt count, and then completes.
func TestWorkerOverKafkaRetriesAfterDelay(t *testing.T) {
	t.Parallel()
	e := newWorkEnv(t)
	d := e.driver()
	x := brokertest.NewRuns()
	const wait = 1500 * time.Millisecond
	var attempts []string
	job := reportJob(func(_ context.Context, _ *worker.Job, d *worker.Delivery) error {
		x.Mu.Lock()
		attempts = append(attempts, d.Header(worker.HeaderAttempts))
		x.Mu.Unlock()
		if x.Ran() == 1 {
			return worker.RetryAfter(errors.New("429 from the renderer"), wait)
		}
		x.Effect(d)
		return nil
	})
	r := brokertest.StartWorker(t, d, worker.NewMemoryClaims(nil), job)
	brokertest.Dispatch(t, d, &job, "report-1", `{}`)
	eventually(t, 15*time.Second, "completion", func() bool { return r.Count(worker.Completed) == 1 })
	eventually(t, 10*time.Second, "offsets committed", e.drained)
	x.Mu.Lock()
	defer x.Mu.Unlock()
	if len(x.At) != 2 || x.At[1].Sub(x.At[0]) < wait {
		t.Fatalf("runs at %v, want two, %s apart at least", x.At, wait)
	}
	if attempts[1] != "1" || r.Count(worker.Retried) != 1 || x.Done["report-1"] != 1 {
		t.Fatalf("attempt headers %q, %d retries, %d effects", attempts, r.Count(worker.Retried), x.Done["report-1"])
	}
}

// A permanent error is dead-lettered once as the canonical envelope, and
// a collector of kind kafka reads it back.
func TestWorkerOverKafkaPermanentDeadLettersOnce(t *testing.T) {
	t.Parallel()
	e := newWorkEnv(t)
	d := e.driver()
	x := brokertest.NewRuns()
	job := reportJob(func(context.Context, *worker.Job, *worker.Delivery) error {
		x.Ran()
		return worker.Permanent(errors.New("the report template does not exist"))
	})
	r := brokertest.StartWorker(t, d, worker.NewMemoryClaims(nil), job)
	brokertest.Dispatch(t, d, &job, "report-1", `{"template":"nope"}`)
	eventually(t, 10*time.Second, "a dead letter", func() bool { return r.Count(worker.DeadLettered) == 1 })
	eventually(t, 10*time.Second, "offsets committed", e.drained)
	if n := x.Count(); n != 1 {
		t.Fatalf("the handler ran %d times, want 1", n)
	}
	m := e.failures(1)[0]
	if m.JobName != "build-report" || m.Queue != workTopic || m.IdempotencyKey != "report-1" || m.Attempts != 1 ||
		m.FailureClass != quarantine.ClassPermanent || string(m.Payload) != `{"template":"nope"}` {
		t.Fatalf("envelope %+v", m)
	}
	st := openStore(t)
	runCollector(t, "kafka-failed", e.k.config("quarantine", failureTopic), st, 10)
	eventually(t, 10*time.Second, "the envelope collected", func() bool { return len(allMessages(t, st, "kafka-failed")) == 1 })
	if got := allMessages(t, st, "kafka-failed")[0]; got.Queue != workTopic || got.IdempotencyKey != "report-1" {
		t.Fatalf("collected %+v", got)
	}
}

// Attempts never exceed MaxAttempts: the third failure dead-letters as
// exhausted, and nothing runs after it.
func TestWorkerOverKafkaAttemptCap(t *testing.T) {
	t.Parallel()
	e := newWorkEnv(t)
	d := e.driver()
	x := brokertest.NewRuns()
	job := reportJob(func(context.Context, *worker.Job, *worker.Delivery) error {
		x.Ran()
		return errors.New("renderer down")
	})
	job.MaxAttempts = 3
	r := brokertest.StartWorker(t, d, worker.NewMemoryClaims(nil), job)
	brokertest.Dispatch(t, d, &job, "report-1", `{}`)
	eventually(t, 15*time.Second, "a dead letter", func() bool { return r.Count(worker.DeadLettered) == 1 })
	eventually(t, 10*time.Second, "offsets committed", e.drained)
	if n := x.Count(); n != 3 || r.Count(worker.Retried) != 2 {
		t.Fatalf("the handler ran %d times (%d retries), want 3 (2)", n, r.Count(worker.Retried))
	}
	fs := e.failures(1)
	if fs[0].FailureClass != quarantine.ClassExhausted || fs[0].Attempts != 3 {
		t.Fatalf("failure envelope %+v", fs[0])
	}
}

// A second message of a completed key is acked without running.
func TestWorkerOverKafkaDuplicateKeyAcked(t *testing.T) {
	t.Parallel()
	e := newWorkEnv(t)
	d := e.driver()
	x := brokertest.NewRuns()
	job := reportJob(func(_ context.Context, _ *worker.Job, d *worker.Delivery) error {
		x.Ran()
		x.Effect(d)
		return nil
	})
	r := brokertest.StartWorker(t, d, worker.NewMemoryClaims(nil), job)
	brokertest.Dispatch(t, d, &job, "report-1", `{}`)
	eventually(t, 10*time.Second, "completion", func() bool { return r.Count(worker.Completed) == 1 })
	brokertest.Dispatch(t, d, &job, "report-1", `{}`)
	eventually(t, 10*time.Second, "offsets committed", func() bool { return e.k.committedLag("worker-"+workTopic, workTopic) == 0 })
	if x.Effects("report-1") != 1 || x.Count() != 1 {
		t.Fatalf("%d effects, %d runs; want 1, 1", x.Effects("report-1"), x.Count())
	}
}

// A delivery never settled (the driver closed under it) is delivered
// again to the next driver of the group: nothing is lost.
func TestWorkDriverUnsettledIsDeliveredAgain(t *testing.T) {
	t.Parallel()
	e := newWorkEnv(t)
	d1, err := NewWorkDriver(e.config(), quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	job := reportJob(func(context.Context, *worker.Job, *worker.Delivery) error { return nil })
	brokertest.Dispatch(t, d1, &job, "report-1", `{"n":1}`)
	ctx, cancel := context.WithTimeout(context.Background(), 10*patience*time.Second)
	defer cancel()
	ds, err := d1.Receive(ctx, 10)
	if err != nil || len(ds) != 1 {
		t.Fatalf("Receive: %d, %v", len(ds), err)
	}
	if ds[0].Header(worker.HeaderIdempotencyKey) != "report-1" || string(ds[0].Body) != `{"n":1}` || ds[0].Queue != workTopic {
		t.Fatalf("delivery %+v", ds[0])
	}
	_ = d1.Close() // never settled
	d2 := e.driver()
	again, err := d2.Receive(ctx, 10)
	if err != nil || len(again) != 1 || again[0].ID != ds[0].ID {
		t.Fatalf("after the restart: %d deliveries, %v", len(again), err)
	}
	if err := d2.Ack(ctx, again[0]); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "offsets committed", e.drained)
}

func TestWorkConfigValidate(t *testing.T) {
	t.Parallel()
	ok := WorkConfig{Brokers: []string{"127.0.0.1:9092"}, Topic: "reports", FailureTopic: "reports.failed"}
	for _, tc := range []struct {
		name  string
		mod   func(*WorkConfig)
		field string
	}{
		{"ok", func(*WorkConfig) {}, ""},
		{"no topic", func(c *WorkConfig) { c.Topic = "" }, "topic"},
		{"failure is work", func(c *WorkConfig) { c.FailureTopic = "reports" }, "failure_topic"},
		{"failure is retry", func(c *WorkConfig) { c.FailureTopic = "reports.retry" }, "failure_topic"},
		{"bad failure", func(c *WorkConfig) { c.FailureTopic = "a b" }, "failure_topic"},
		{"retry is work", func(c *WorkConfig) { c.RetryTopic = "reports" }, "retry_topic"},
		{"delay", func(c *WorkConfig) { c.MaxDelay = 800 * time.Hour }, "max_delay"},
		{"session", func(c *WorkConfig) { c.SessionTimeout = 12 * time.Second }, ""},
		{"short session", func(c *WorkConfig) { c.SessionTimeout = 500 * time.Millisecond }, "session_timeout"},
		{"instance", func(c *WorkConfig) { c.InstanceID = "worker-0" }, ""},
		{"bad instance", func(c *WorkConfig) { c.InstanceID = "worker 0" }, "instance_id"},
		{"long instance", func(c *WorkConfig) { c.InstanceID = strings.Repeat("w", 250) }, "instance_id"},
	} {
		c := ok
		tc.mod(&c)
		err := c.Validate()
		if quarantine.ErrorField(err) != tc.field || (tc.field == "") != (err == nil) {
			t.Errorf("%s: %v, want field %q", tc.name, err, tc.field)
		}
	}
}

// A retry waiting for a long delay holds its retry partition only: new
// work keeps running meanwhile, and the waiting retry is not run early.
func TestWorkerOverKafkaWaitingRetryHoldsNothingElse(t *testing.T) {
	t.Parallel()
	e := newWorkEnv(t)
	d := e.driver()
	x := brokertest.NewRuns()
	job := reportJob(func(_ context.Context, _ *worker.Job, d *worker.Delivery) error {
		x.Ran()
		if d.Header(worker.HeaderIdempotencyKey) == "slow" {
			return worker.RetryAfter(errors.New("come back in an hour"), time.Hour)
		}
		x.Effect(d)
		return nil
	})
	r := brokertest.StartWorker(t, d, worker.NewMemoryClaims(nil), job)
	brokertest.Dispatch(t, d, &job, "slow", `{}`)
	eventually(t, 10*time.Second, "the retry", func() bool { return r.Count(worker.Retried) == 1 })
	for _, k := range []string{"a", "b", "c"} {
		brokertest.Dispatch(t, d, &job, k, `{}`)
	}
	eventually(t, 10*time.Second, "new work done", func() bool { return r.Count(worker.Completed) == 3 })
	if n := x.Count(); n != 4 {
		t.Fatalf("%d runs, want 4 (the retry not run early)", n)
	}
	eventually(t, 10*time.Second, "work topic committed", func() bool { return e.k.committedLag("worker-"+workTopic, workTopic) == 0 })
	if lag := e.k.committedLag("worker-"+workTopic, retryTopic); lag != 1 {
		t.Fatalf("retry topic lag %d, want 1: the waiting retry must not be committed", lag)
	}
}

// Two workers share the group: every job has exactly one effect. A
// rebalance (the second member joining while the first works) may take a
// partition from a worker between its effect and its commit: that
// settlement fails, the record's new owner delivers it again and acks it
// as a duplicate of the completed key.
func TestWorkerOverKafkaTwoMembers(t *testing.T) {
	t.Parallel()
	e := newWorkEnv(t)
	x := brokertest.NewRuns()
	job := reportJob(func(_ context.Context, _ *worker.Job, d *worker.Delivery) error {
		x.Ran()
		x.Effect(d)
		return nil
	})
	claims := worker.NewMemoryClaims(nil)
	d1, d2 := e.driver(), e.driver()
	r1 := brokertest.StartWorker(t, d1, claims, job)
	r2 := brokertest.StartWorker(t, d2, claims, job)
	const n = 60
	for i := range n {
		brokertest.Dispatch(t, d1, &job, "k"+strconv.Itoa(i), `{}`)
	}
	eventually(t, 20*time.Second, "every job done", func() bool {
		for i := range n {
			if x.Effects("k"+strconv.Itoa(i)) == 0 {
				return false
			}
		}
		return true
	})
	eventually(t, 10*time.Second, "offsets committed", e.drained)
	for i := range n {
		if got := x.Effects("k" + strconv.Itoa(i)); got != 1 {
			t.Fatalf("key k%d: %d effects", i, got)
		}
	}
	settled := func() (completed, duplicates int) {
		return r1.Count(worker.Completed) + r2.Count(worker.Completed), r1.Count(worker.Duplicate) + r2.Count(worker.Duplicate)
	}
	eventually(t, 10*time.Second, "every job acknowledged, completed or as a duplicate", func() bool { c, d := settled(); return c+d >= n })
	if c, d := settled(); c > n {
		t.Fatalf("%d completed (and %d duplicates) for %d jobs", c, d, n)
	}
}

// An unreachable cluster is an EUNAVAILABLE error of Receive (the worker
// logs it and backs off), not a silent wait.
func TestWorkDriverUnreachable(t *testing.T) {
	t.Parallel()
	d, err := NewWorkDriver(WorkConfig{Brokers: []string{"127.0.0.1:1"}, Topic: "reports", FailureTopic: "reports.failed"}, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	d.pollEvery = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), patience*5*time.Second)
	defer cancel()
	ds, err := d.Receive(ctx, 10)
	if len(ds) != 0 || quarantine.ErrorCode(err) != quarantine.EUNAVAILABLE || ctx.Err() != nil {
		t.Fatalf("%d deliveries, %v", len(ds), err)
	}
}

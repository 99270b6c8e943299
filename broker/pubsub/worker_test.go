package pubsub

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
	bt "github.com/quarantine-dev/quarantine/internal/brokertest"
	"github.com/quarantine-dev/quarantine/worker"
)

// workEnv is a server with a work topic and subscription, and a failure
// topic with the subscription a collector drains.
type workEnv struct {
	t *testing.T
	s *server
}

const (
	workTopic    = "reports"
	workSub      = "reports-worker"
	failureTopic = "reports.failed"
	failureSub   = "reports.failed-quarantine"
)

// newWorkEnv makes the topics; maxAttempts > 0 gives the work
// subscription a dead-letter policy to the failure topic (so Pub/Sub
// counts deliveries).
func newWorkEnv(t *testing.T, maxAttempts int32) *workEnv {
	s := newServer(t)
	s.topic(workTopic)
	s.topic(failureTopic)
	dl := ""
	if maxAttempts > 0 {
		dl = failureTopic
	}
	s.subscription(workSub, workTopic, dl, maxAttempts)
	s.subscription(failureSub, failureTopic, "", 0)
	return &workEnv{t: t, s: s}
}

func (e *workEnv) config() WorkConfig {
	return WorkConfig{Project: project, Endpoint: e.s.srv.Addr, Topic: workTopic, Subscription: workSub, FailureTopic: failureTopic, AckDeadline: 10 * time.Second}
}

func (e *workEnv) driver() *WorkDriver {
	e.t.Helper()
	d, err := NewWorkDriver(e.config(), quietLogger())
	if err != nil {
		e.t.Fatal(err)
	}
	d.pollEvery = 2 * time.Second
	e.t.Cleanup(func() { _ = d.Close() })
	return d
}

// settled: nothing of the work subscription is left unacknowledged.
func (e *workEnv) settled() bool {
	for _, m := range e.s.srv.Messages() {
		if m.Acks == 0 && !isFailure(m.Data) {
			return false
		}
	}
	return true
}

func isFailure(data []byte) bool { return claimsEnvelope(data) }

// failures decodes the n envelopes of the failure topic.
func (e *workEnv) failures(n int) []*quarantine.Message {
	e.t.Helper()
	var out []*quarantine.Message
	for _, m := range e.s.pull(failureSub, n) {
		q, problems := collect.DecodeEnvelope(m.Data, collect.Origin{Source: "test", Kind: quarantine.SourcePubSub})
		if len(problems) > 0 {
			e.t.Fatalf("the failure envelope does not decode: %+v\n%s", problems, m.Data)
		}
		out = append(out, q)
	}
	return out
}

func reportJob(h worker.Handler) worker.Job {
	return worker.Job{Name: "build-report", Queue: workTopic, SchemaVersion: "1", Concurrency: 2,
		Backoff: worker.BackoffFunc(func(int) time.Duration { return time.Second }), Handler: h}
}

// A job completes once, its claim is done, and it is acknowledged.
func TestWorkerOverPubSubCompletes(t *testing.T) {
	t.Parallel()
	e := newWorkEnv(t, 0)
	d := e.driver()
	x := bt.NewRuns()
	job := reportJob(func(_ context.Context, _ *worker.Job, d *worker.Delivery) error {
		x.Ran()
		x.Effect(d)
		return nil
	})
	claims := worker.NewMemoryClaims(nil)
	r := bt.StartWorker(t, d, claims, job)
	bt.Dispatch(t, d, &job, "report-1", `{"n":1}`)
	eventually(t, 10*time.Second, "completion", func() bool { return r.Count(worker.Completed) == 1 })
	eventually(t, 10*time.Second, "the ack", e.settled)
	if x.Effects("report-1") != 1 || !claims.Done("report-1") {
		t.Fatalf("effects %d, claim done %v", x.Effects("report-1"), claims.Done("report-1"))
	}
}

// A RetryAfter is honoured as a lower bound (the ack deadline set to it),
// the redelivery carries the worker's attempt count, and the job then
// completes.
func TestWorkerOverPubSubRetriesAfterDelay(t *testing.T) {
	t.Parallel()
	e := newWorkEnv(t, 0)
	d := e.driver()
	x := bt.NewRuns()
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
	r := bt.StartWorker(t, d, worker.NewMemoryClaims(nil), job)
	bt.Dispatch(t, d, &job, "report-1", `{}`)
	eventually(t, 15*time.Second, "completion", func() bool { return r.Count(worker.Completed) == 1 })
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
// a collector of kind pubsub reads it back.
func TestWorkerOverPubSubPermanentDeadLettersOnce(t *testing.T) {
	t.Parallel()
	e := newWorkEnv(t, 0)
	d := e.driver()
	x := bt.NewRuns()
	job := reportJob(func(context.Context, *worker.Job, *worker.Delivery) error {
		x.Ran()
		return worker.Permanent(errors.New("the report template does not exist"))
	})
	r := bt.StartWorker(t, d, worker.NewMemoryClaims(nil), job)
	bt.Dispatch(t, d, &job, "report-1", `{"template":"nope"}`)
	eventually(t, 10*time.Second, "a dead letter", func() bool { return r.Count(worker.DeadLettered) == 1 })
	eventually(t, 10*time.Second, "the ack", e.settled)
	if n := x.Count(); n != 1 {
		t.Fatalf("the handler ran %d times, want 1", n)
	}
	st := openStore(t)
	runCollector(t, "ps-failed", e.s.config(failureSub), st, 10)
	eventually(t, 10*time.Second, "the envelope collected", func() bool { return len(allMessages(t, st, "ps-failed")) == 1 })
	got, err := st.GetMessage(context.Background(), allMessages(t, st, "ps-failed")[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Queue != workTopic || got.IdempotencyKey != "report-1" || got.JobName != "build-report" || got.Attempts != 1 ||
		got.FailureClass != quarantine.ClassPermanent || string(got.Payload) != `{"template":"nope"}` {
		t.Fatalf("collected %+v", got)
	}
}

// Attempts never exceed MaxAttempts, with Pub/Sub counting deliveries (a
// dead-letter policy) or not: the third failure dead-letters as
// exhausted, and nothing runs after it.
func TestWorkerOverPubSubAttemptCap(t *testing.T) {
	t.Parallel()
	for _, policy := range []int32{0, 10} {
		t.Run("policy "+strconv.Itoa(int(policy)), func(t *testing.T) {
			t.Parallel()
			e := newWorkEnv(t, policy)
			d := e.driver()
			x := bt.NewRuns()
			job := reportJob(func(context.Context, *worker.Job, *worker.Delivery) error {
				x.Ran()
				return errors.New("renderer down")
			})
			job.MaxAttempts = 3
			r := bt.StartWorker(t, d, worker.NewMemoryClaims(nil), job)
			bt.Dispatch(t, d, &job, "report-1", `{}`)
			eventually(t, 15*time.Second, "a dead letter", func() bool { return r.Count(worker.DeadLettered) == 1 })
			if n := x.Count(); n != 3 || r.Count(worker.Retried) != 2 {
				t.Fatalf("the handler ran %d times (%d retries), want 3 (2)", n, r.Count(worker.Retried))
			}
			fs := e.failures(1)
			if fs[0].FailureClass != quarantine.ClassExhausted || fs[0].Attempts != 3 {
				t.Fatalf("failure envelope %+v", fs[0])
			}
		})
	}
}

// A second message of a completed key is acked without running.
func TestWorkerOverPubSubDuplicateKeyAcked(t *testing.T) {
	t.Parallel()
	e := newWorkEnv(t, 0)
	d := e.driver()
	x := bt.NewRuns()
	job := reportJob(func(_ context.Context, _ *worker.Job, d *worker.Delivery) error {
		x.Ran()
		x.Effect(d)
		return nil
	})
	r := bt.StartWorker(t, d, worker.NewMemoryClaims(nil), job)
	bt.Dispatch(t, d, &job, "report-1", `{}`)
	eventually(t, 10*time.Second, "completion", func() bool { return r.Count(worker.Completed) == 1 })
	bt.Dispatch(t, d, &job, "report-1", `{}`)
	eventually(t, 10*time.Second, "the duplicate", func() bool { return r.Count(worker.Duplicate) == 1 })
	eventually(t, 10*time.Second, "both acked", e.settled)
	if x.Effects("report-1") != 1 || x.Count() != 1 {
		t.Fatalf("%d effects, %d runs; want 1, 1", x.Effects("report-1"), x.Count())
	}
}

// A delivery never settled (the driver closed under it) is delivered
// again at once to the next driver: nothing is lost.
func TestWorkDriverUnsettledIsDeliveredAgain(t *testing.T) {
	t.Parallel()
	e := newWorkEnv(t, 0)
	d1, err := NewWorkDriver(e.config(), quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	job := reportJob(func(context.Context, *worker.Job, *worker.Delivery) error { return nil })
	bt.Dispatch(t, d1, &job, "report-1", `{"n":1}`)
	ctx, cancel := context.WithTimeout(context.Background(), 10*patience*time.Second)
	defer cancel()
	ds, err := d1.Receive(ctx, 10)
	if err != nil || len(ds) != 1 {
		t.Fatalf("Receive: %d, %v", len(ds), err)
	}
	if ds[0].Header(worker.HeaderIdempotencyKey) != "report-1" || string(ds[0].Body) != `{"n":1}` || ds[0].Queue != workTopic ||
		ds[0].ContentType != "application/json" {
		t.Fatalf("delivery %+v", ds[0])
	}
	_ = d1.Close() // never settled
	d2 := e.driver()
	start := time.Now()
	again, err := d2.Receive(ctx, 10)
	if err != nil || len(again) != 1 || again[0].ID != ds[0].ID {
		t.Fatalf("after the restart: %d deliveries, %v", len(again), err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Errorf("redelivered after %s: Close did not give it back", waited)
	}
	if err := d2.Ack(ctx, again[0]); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the ack", e.settled)
}

// An unreachable service or a missing subscription is an EUNAVAILABLE
// error of Receive (the worker logs it and backs off).
func TestWorkDriverUnavailable(t *testing.T) {
	t.Parallel()
	e := newWorkEnv(t, 0)
	for name, cfg := range map[string]WorkConfig{
		"no service":      {Project: project, Endpoint: "127.0.0.1:1", Topic: "reports", Subscription: "reports-w", FailureTopic: "reports.failed"},
		"no subscription": {Project: project, Endpoint: e.s.srv.Addr, Topic: "reports", Subscription: "nope", FailureTopic: "reports.failed"},
	} {
		d, err := NewWorkDriver(cfg, quietLogger())
		if err != nil {
			t.Fatal(err)
		}
		d.pollEvery = time.Second
		ctx, cancel := context.WithTimeout(context.Background(), patience*5*time.Second)
		ds, err := d.Receive(ctx, 10)
		if len(ds) != 0 || quarantine.ErrorCode(err) != quarantine.EUNAVAILABLE || ctx.Err() != nil {
			t.Errorf("%s: %d deliveries, %v", name, len(ds), err)
		}
		cancel()
		_ = d.Close()
	}
}

func TestWorkConfigValidate(t *testing.T) {
	t.Parallel()
	ok := WorkConfig{Project: "my-project", Topic: "reports", Subscription: "reports-w", FailureTopic: "reports.failed"}
	for _, tc := range []struct {
		name  string
		mod   func(*WorkConfig)
		field string
	}{
		{"ok", func(*WorkConfig) {}, ""},
		{"no topic", func(c *WorkConfig) { c.Topic = "" }, "topic"},
		{"no subscription", func(c *WorkConfig) { c.Subscription = "" }, "subscription"},
		{"failure is work", func(c *WorkConfig) { c.FailureTopic = "projects/my-project/topics/reports" }, "failure_topic"},
		{"bad failure", func(c *WorkConfig) { c.FailureTopic = "a b" }, "failure_topic"},
		{"deadline", func(c *WorkConfig) { c.AckDeadline = time.Second }, "ack_deadline"},
	} {
		c := ok
		tc.mod(&c)
		err := c.Validate()
		if quarantine.ErrorField(err) != tc.field || (tc.field == "") != (err == nil) {
			t.Errorf("%s: %v, want field %q", tc.name, err, tc.field)
		}
	}
}

package sqs

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
	"github.com/quarantine-dev/quarantine/worker"
)

// workEnv is a work queue and a failure queue on the emulator.
type workEnv struct {
	*env
	work, workURL string
	fail, failURL string
}

// newWorkEnv creates both queues; the work queue's own visibility timeout
// is vt (what a message not received through the driver would get).
func newWorkEnv(t *testing.T, prefix string, vt time.Duration) *workEnv {
	t.Helper()
	e := newEnv(t)
	w := &workEnv{env: e}
	w.fail, w.failURL = e.queue(prefix+"-fail", nil)
	w.work, w.workURL = e.queue(prefix+"-work", map[string]string{"VisibilityTimeout": strconv.Itoa(int(vt / time.Second))})
	return w
}

// driver returns a WorkDriver on both queues with visibility vt, a 1 s
// long poll, changed by mod.
func (w *workEnv) driver(vt time.Duration, mod func(*WorkConfig)) *WorkDriver {
	w.tb.Helper()
	cfg := WorkConfig{Region: "us-east-1", Endpoint: w.endpoint, Protocol: ProtocolQuery,
		QueueURL: w.workURL, FailureQueueURL: w.failURL, VisibilityTimeout: vt, WaitTime: time.Second}
	if mod != nil {
		mod(&cfg)
	}
	d, err := NewWorkDriver(cfg, quietLogger())
	if err != nil {
		w.tb.Fatal(err)
	}
	return d
}

// journal records what handlers saw and what the worker settled.
type journal struct {
	mu       sync.Mutex
	runs     []run
	outcomes []worker.Outcome
}

type run struct {
	at       time.Time
	id, key  string
	body     string
	attempt  int // backend receive count
	attempts string
	enqueued time.Time
	headers  map[string]string
}

func (j *journal) ran(d *worker.Delivery) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.runs = append(j.runs, run{at: time.Now(), id: d.ID, key: d.Header(worker.HeaderIdempotencyKey), body: string(d.Body),
		attempt: d.Attempt, attempts: d.Header(worker.HeaderAttempts), enqueued: d.EnqueuedAt, headers: d.Headers})
}

func (j *journal) outcome(o worker.Outcome) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.outcomes = append(j.outcomes, o)
}

func (j *journal) runList() []run {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]run(nil), j.runs...)
}

func (j *journal) count(r worker.Result) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	n := 0
	for _, o := range j.outcomes {
		if o.Result == r {
			n++
		}
	}
	return n
}

func (j *journal) first(r worker.Result) worker.Outcome {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, o := range j.outcomes {
		if o.Result == r {
			return o
		}
	}
	return worker.Outcome{}
}

// startWorker runs a worker over drv with claims (nil: none) and jobs
// until the test ends.
func startWorker(t *testing.T, j *journal, drv worker.Driver, claims worker.Claims, jobs ...worker.Job) {
	t.Helper()
	w, err := worker.New(worker.Config{Driver: drv, Claims: claims, Logger: quietLogger(), OnOutcome: j.outcome,
		DrainTimeout: 10 * time.Second, ClaimLease: time.Minute})
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
	t.Cleanup(func() { cancel(); <-done })
}

// chargeJob is a job "charge" on queue whose handler journals each run
// and returns what fn says.
func chargeJob(queue string, j *journal, fn func(d *worker.Delivery) error) worker.Job {
	return worker.Job{Name: "charge", Queue: queue, SchemaVersion: "1", Concurrency: 2,
		Backoff: worker.BackoffFunc(func(int) time.Duration { return 0 }),
		Handler: func(ctx context.Context, _ *worker.Job, d *worker.Delivery) error {
			j.ran(d)
			return fn(d)
		}}
}

func dispatch(t *testing.T, s worker.Sender, job *worker.Job, key, body string) {
	t.Helper()
	if err := worker.Dispatch(context.Background(), s, job, key, []byte(body), nil); err != nil {
		t.Fatal(err)
	}
}

// quiet waits until the work queue holds no copy of any job, neither
// visible nor in flight (nothing can come back then), and checks that
// the journal did not change meanwhile: no second run, no second outcome.
func quiet(t *testing.T, j *journal, e *workEnv) {
	t.Helper()
	runs := len(j.runList())
	j.mu.Lock()
	settled := len(j.outcomes)
	j.mu.Unlock()
	eventually(t, 30*time.Second, "the work queue to hold nothing", func() bool { return e.held(e.workURL) == 0 })
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.runs) != runs || len(j.outcomes) != settled {
		t.Fatalf("once the work queue was empty: %d runs (was %d), %d outcomes (was %d)", len(j.runs), runs, len(j.outcomes), settled)
	}
}

// A job that succeeds is deleted: one run per key, nothing left on either
// queue. The delivery carries what Dispatch sent.
func TestWorkerSuccessDeletes(t *testing.T) {
	t.Parallel()
	e := newWorkEnv(t, "work-ok", 2*time.Second)
	drv := e.driver(4*time.Second, nil)
	j := &journal{}
	job := chargeJob(e.work, j, func(*worker.Delivery) error { return nil })
	startWorker(t, j, drv, worker.NewMemoryClaims(nil), job)
	for i := range 3 {
		dispatch(t, drv, &job, "order-"+strconv.Itoa(i), `{"n":`+strconv.Itoa(i)+`}`)
	}
	eventually(t, 30*time.Second, "3 completions", func() bool { return j.count(worker.Completed) == 3 })
	quiet(t, j, e) // nothing left to come back
	keys := map[string]int{}
	for _, r := range j.runList() {
		keys[r.key]++
		if r.headers[worker.HeaderJobName] != "charge" || r.headers[worker.HeaderSchemaVersion] != "1" || r.headers[worker.HeaderEnqueuedAt] == "" {
			t.Errorf("delivery headers %v", r.headers)
		}
		if r.attempt != 1 || r.id == "" || r.enqueued.IsZero() || time.Since(r.enqueued) > time.Minute {
			t.Errorf("delivery id %q attempt %d enqueued %s", r.id, r.attempt, r.enqueued)
		}
	}
	if len(keys) != 3 || keys["order-0"] != 1 || keys["order-1"] != 1 || keys["order-2"] != 1 {
		t.Fatalf("runs by key %v, want one each of order-0..2", keys)
	}
	if n := e.held(e.workURL); n != 0 {
		t.Fatalf("work queue still holds %d messages", n)
	}
	if n := e.held(e.failURL); n != 0 {
		t.Fatalf("failure queue holds %d messages", n)
	}
}

// An ordinary error is retried after its delay, not before, carrying the
// worker's attempt count (goaws keeps ApproximateReceiveCount at 1), the
// job id and the enqueue time of the first message; then it completes.
func TestWorkerRetryWaitsItsDelay(t *testing.T) {
	t.Parallel()
	const delay = 2 * time.Second
	e := newWorkEnv(t, "work-retry", 2*time.Second)
	drv := e.driver(4*time.Second, nil)
	j := &journal{}
	var failedAt time.Time
	var mu sync.Mutex
	job := chargeJob(e.work, j, func(d *worker.Delivery) error {
		if d.Header(worker.HeaderAttempts) == "" {
			mu.Lock()
			failedAt = time.Now()
			mu.Unlock()
			return errors.New("downstream timed out")
		}
		return nil
	})
	job.Backoff = worker.BackoffFunc(func(int) time.Duration { return delay })
	startWorker(t, j, drv, worker.NewMemoryClaims(nil), job)
	dispatch(t, drv, &job, "order-r", `{"n":1}`)
	eventually(t, 30*time.Second, "the completion", func() bool { return j.count(worker.Completed) == 1 })
	quiet(t, j, e)
	runs := j.runList()
	if len(runs) != 2 || j.count(worker.Retried) != 1 {
		t.Fatalf("%d runs, %d retries; want 2 runs, 1 retry", len(runs), j.count(worker.Retried))
	}
	mu.Lock()
	gap := runs[1].at.Sub(failedAt)
	mu.Unlock()
	if gap < delay-50*time.Millisecond {
		t.Fatalf("the retry ran %s after the failure, before its delay of %s", gap, delay)
	}
	second := runs[1]
	if second.attempts != "1" || second.headers[worker.HeaderFirstFailedAt] == "" || second.key != "order-r" {
		t.Fatalf("retried delivery: attempts %q, headers %v", second.attempts, second.headers)
	}
	if second.id != runs[0].id || !second.enqueued.Equal(runs[0].enqueued) {
		t.Fatalf("retried delivery id %s enqueued %s, want the first's %s %s", second.id, second.enqueued, runs[0].id, runs[0].enqueued)
	}
	if o := j.first(worker.Completed); o.Attempt != 2 {
		t.Fatalf("completed at attempt %d, want 2", o.Attempt)
	}
	t.Logf("retry ran %s after the failure (delay %s); receive count on the retry: %d", gap, delay, second.attempt)
	if n := e.held(e.workURL); n != 0 {
		t.Fatalf("work queue still holds %d messages", n)
	}
}

// failures receives and deletes what the failure queue holds, expecting n
// envelopes (and waiting a second for any more), decoded.
func (w *workEnv) failures(n int) []*quarantine.Message {
	w.tb.Helper()
	var out []*quarantine.Message
	for _, m := range w.drainQueue(w.failURL, n, 30*time.Second) {
		msg, problems := collect.DecodeEnvelope([]byte(aws.ToString(m.Body)), collect.Origin{Source: "test", Kind: quarantine.SourceSQS})
		if len(problems) > 0 {
			w.tb.Fatalf("envelope problems %v in %s", problems, aws.ToString(m.Body))
		}
		out = append(out, msg)
	}
	if len(out) != n {
		w.tb.Fatalf("%d envelopes on the failure queue, want %d", len(out), n)
	}
	return out
}

// A permanent error dead-letters at once: exactly one canonical envelope
// on the failure queue (job id, name, queue, key, attempts, class, the
// payload), the job deleted and never run again.
func TestWorkerPermanentDeadLettersOnce(t *testing.T) {
	t.Parallel()
	e := newWorkEnv(t, "work-perm", 2*time.Second)
	drv := e.driver(2*time.Second, nil)
	j := &journal{}
	job := chargeJob(e.work, j, func(*worker.Delivery) error { return worker.Permanent(errors.New("card declined")) })
	startWorker(t, j, drv, worker.NewMemoryClaims(nil), job)
	dispatch(t, drv, &job, "order-p", `{"n":7}`)
	eventually(t, 30*time.Second, "the dead-letter", func() bool { return j.count(worker.DeadLettered) == 1 })
	quiet(t, j, e) // deleted, not left to reappear
	env := e.failures(1)[0]
	runs := j.runList()
	if len(runs) != 1 {
		t.Fatalf("%d runs, want 1", len(runs))
	}
	if env.MessageID != runs[0].id || env.JobName != "charge" || env.Queue != e.work || env.IdempotencyKey != "order-p" ||
		env.Attempts != 1 || env.FailureClass != quarantine.ClassPermanent || string(env.Payload) != `{"n":7}` ||
		env.SchemaVersion != "1" || env.Reason == "" {
		t.Fatalf("envelope %+v (payload %s)", env, env.Payload)
	}
	if n := e.held(e.workURL); n != 0 {
		t.Fatalf("work queue still holds %d messages", n)
	}
}

// The attempt cap holds on goaws, whose receive count stays 1: three
// attempts, then one exhausted envelope, and no fourth run.
func TestWorkerAttemptCapHolds(t *testing.T) {
	t.Parallel()
	e := newWorkEnv(t, "work-cap", 2*time.Second)
	drv := e.driver(2*time.Second, nil)
	j := &journal{}
	job := chargeJob(e.work, j, func(*worker.Delivery) error { return errors.New("still down") })
	job.MaxAttempts = 3
	startWorker(t, j, drv, worker.NewMemoryClaims(nil), job)
	dispatch(t, drv, &job, "order-c", `{"n":3}`)
	eventually(t, 30*time.Second, "the dead-letter", func() bool { return j.count(worker.DeadLettered) == 1 })
	quiet(t, j, e)
	runs := j.runList()
	if len(runs) != 3 || j.count(worker.Retried) != 2 {
		t.Fatalf("%d runs, %d retries; want 3 runs, 2 retries", len(runs), j.count(worker.Retried))
	}
	for i, r := range runs {
		if want := map[int]string{0: "", 1: "1", 2: "2"}[i]; r.attempts != want {
			t.Errorf("run %d: x-quarantine-attempts %q, want %q (receive count %d)", i, r.attempts, want, r.attempt)
		}
	}
	env := e.failures(1)[0]
	if env.Attempts != 3 || env.FailureClass != quarantine.ClassExhausted || env.IdempotencyKey != "order-c" || env.MessageID != runs[0].id {
		t.Fatalf("envelope %+v", env)
	}
	if _, ok := env.Headers[worker.HeaderAttempts]; ok {
		t.Errorf("envelope headers carry the worker's bookkeeping: %v", env.Headers)
	}
	if n := e.held(e.workURL); n != 0 {
		t.Fatalf("work queue still holds %d messages", n)
	}
}

// A second delivery of a key already completed is deleted without running
// the handler.
func TestWorkerDuplicateOfCompletedKey(t *testing.T) {
	t.Parallel()
	e := newWorkEnv(t, "work-dup", 2*time.Second)
	drv := e.driver(2*time.Second, nil)
	j := &journal{}
	job := chargeJob(e.work, j, func(*worker.Delivery) error { return nil })
	startWorker(t, j, drv, worker.NewMemoryClaims(nil), job)
	dispatch(t, drv, &job, "order-d", `{"n":1}`)
	eventually(t, 30*time.Second, "the completion", func() bool { return j.count(worker.Completed) == 1 })
	dispatch(t, drv, &job, "order-d", `{"n":1}`)
	eventually(t, 30*time.Second, "the duplicate", func() bool { return j.count(worker.Duplicate) == 1 })
	quiet(t, j, e)
	if runs := j.runList(); len(runs) != 1 {
		t.Fatalf("the handler ran %d times, want once", len(runs))
	}
	if n := e.held(e.workURL); n != 0 {
		t.Fatalf("work queue still holds %d messages", n)
	}
}

// noExtend is a driver whose Extend does nothing: the control of the
// Extend test, showing that goaws does redeliver an unextended message.
type noExtend struct{ *WorkDriver }

func (noExtend) Extend(context.Context, *worker.Delivery) error { return nil }

// A handler running 5 s on a 2 s visibility timeout is kept alive by
// Extend (every second): it runs once, although nothing else (no claims,
// two slots) would stop a redelivery from running it again. Without
// Extend it runs twice.
func TestWorkerExtendKeepsLongHandler(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		extend bool
		runs   int
	}{{"extended", true, 1}, {"control", false, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newWorkEnv(t, "work-long", 2*time.Second)
			drv := e.driver(2*time.Second, nil)
			if got := drv.Limits(); got.RenewEvery != time.Second || got.MaxRenew != 12*time.Hour {
				t.Fatalf("limits %+v", got)
			}
			var d worker.Driver = drv
			if !tc.extend {
				d = noExtend{drv}
			}
			j := &journal{}
			job := chargeJob(e.work, j, func(*worker.Delivery) error { time.Sleep(5 * time.Second); return nil })
			startWorker(t, j, d, nil, job)
			dispatch(t, drv, &job, "order-l", `{"n":1}`)
			if tc.extend {
				eventually(t, 30*time.Second, "the completion", func() bool { return j.count(worker.Completed) == 1 })
				quiet(t, j, e)
			} else {
				eventually(t, 30*time.Second, "a redelivery of the held message", func() bool { return len(j.runList()) == 2 })
			}
			if runs := j.runList(); len(runs) != tc.runs {
				t.Fatalf("the handler ran %d times, want %d", len(runs), tc.runs)
			}
		})
	}
}

// The attributes of a sent job: at most ten, the driver's origin and the
// worker's own headers first, then content-type, then the rest by name;
// headers SQS refuses are dropped.
func TestWorkAttributesKeepTheJobsOwnFirst(t *testing.T) {
	w := &WorkDriver{log: quietLogger()}
	h := map[string]string{
		"z-extra": "1", "a-extra": "2", "b-extra": "3", "c-extra": "4", "d-extra": "5",
		worker.HeaderIdempotencyKey: "k", worker.HeaderSchemaVersion: "1", worker.HeaderAttempts: "2",
		worker.HeaderFirstFailedAt: "t", worker.HeaderEnqueuedAt: "e", "Content-Type": "text/plain",
		"bad name": "x", "empty": "", "AWS.reserved": "x",
	}
	got := w.attributes(h, "application/json", "charge", "id 123")
	want := []string{headerOrigin, worker.HeaderIdempotencyKey, worker.HeaderJobName, worker.HeaderSchemaVersion,
		worker.HeaderAttempts, worker.HeaderFirstFailedAt, worker.HeaderEnqueuedAt, HeaderContentType, "a-extra", "b-extra"}
	if len(got) != len(want) {
		t.Fatalf("%d attributes %v, want %v", len(got), got, want)
	}
	for _, k := range want {
		if _, ok := got[k]; !ok {
			t.Errorf("attribute %s missing from %v", k, got)
		}
	}
	if v := aws.ToString(got[HeaderContentType].StringValue); v != "application/json" {
		t.Errorf("content-type %q, want the delivery's", v)
	}
	if v := aws.ToString(got[worker.HeaderJobName].StringValue); v != "charge" {
		t.Errorf("job name %q", v)
	}
}

func TestWorkConfigValidate(t *testing.T) {
	base := func() WorkConfig {
		return WorkConfig{QueueURL: "https://sqs.eu-west-1.amazonaws.com/1/jobs", FailureQueue: "jobs-failed"}
	}
	c := base()
	if err := c.validate(); err != nil {
		t.Fatal(err)
	}
	if c.Region != "eu-west-1" || c.Queue != "jobs" || c.VisibilityTimeout != DefaultVisibilityTimeout || c.WaitTime != DefaultWaitTime || c.Protocol != ProtocolJSON {
		t.Fatalf("defaults %+v", c)
	}
	for field, mod := range map[string]func(*WorkConfig){
		"queue_url":          func(c *WorkConfig) { c.QueueURL = "" },
		"failure_queue_url":  func(c *WorkConfig) { c.FailureQueue = "" },
		"queue":              func(c *WorkConfig) { c.QueueURL = "https://sqs.eu-west-1.amazonaws.com/1/jobs.fifo" },
		"region":             func(c *WorkConfig) { c.QueueURL = "http://localhost:4100/1/jobs" },
		"protocol":           func(c *WorkConfig) { c.Protocol = "xml" },
		"visibility_timeout": func(c *WorkConfig) { c.VisibilityTimeout = 1500 * time.Millisecond },
		"wait_time":          func(c *WorkConfig) { c.WaitTime = 21 * time.Second },
		"reject_visibility":  func(c *WorkConfig) { c.RejectVisibility = -time.Second },
	} {
		c := base()
		mod(&c)
		err := c.validate()
		var qe *quarantine.Error
		if !errors.As(err, &qe) || qe.Field != field {
			t.Errorf("%s: got %v", field, err)
		}
	}
}

// Reject leaves the job to the queue's redrive policy: visible again at
// once, it is moved to the queue's own dead-letter queue (goaws: one
// receive after maxReceiveCount), and the worker writes no envelope.
func TestWorkerRejectFollowsTheRedrivePolicy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	_, dlqURL := e.queue("work-reject-redrive", nil)
	attrs, err := e.client.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: aws.String(dlqURL),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	w := &workEnv{env: e}
	w.fail, w.failURL = e.queue("work-reject-fail", nil)
	w.work, w.workURL = e.queue("work-reject", map[string]string{"VisibilityTimeout": "30",
		"RedrivePolicy": `{"maxReceiveCount":"1","deadLetterTargetArn":"` + attrs.Attributes["QueueArn"] + `"}`})
	drv := w.driver(30*time.Second, nil)
	j := &journal{}
	job := chargeJob(w.work, j, func(*worker.Delivery) error { return worker.Reject(errors.New("not for us")) })
	startWorker(t, j, drv, worker.NewMemoryClaims(nil), job)
	dispatch(t, drv, &job, "order-x", `{"n":1}`)
	// Visibility 30 s: only Reject's visibility 0 can bring it back this soon.
	eventually(t, 20*time.Second, "the redrive to the queue's dead-letter queue", func() bool {
		return e.depth(dlqURL) == 1 && e.held(w.workURL) == 0
	})
	if j.count(worker.Rejected) < 1 || j.count(worker.DeadLettered) != 0 {
		t.Fatalf("%d rejections, %d dead-letters", j.count(worker.Rejected), j.count(worker.DeadLettered))
	}
	if n := e.held(w.failURL); n != 0 {
		t.Fatalf("the failure queue holds %d envelopes, want none", n)
	}
}

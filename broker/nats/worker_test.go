package nats

import (
	"context"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
	"github.com/quarantine-dev/quarantine/worker"
)

// envWorkURL points the worker tests at another server (Debian's
// nats-server 2.9, say) instead of an embedded one.
const envWorkURL = "QUARANTINE_TEST_NATS_WORK_URL"

// workEnv is a server (embedded unless envWorkURL is set) with a work
// stream and a failure stream.
type workEnv struct {
	t           *testing.T
	url         string
	js          jetstream.JetStream
	stream      string // the work stream, capturing stream.>
	subject     string // the work subject
	failStream  string
	failSubject string
}

func newWorkEnv(t *testing.T) *workEnv {
	t.Helper()
	url := os.Getenv(envWorkURL)
	if url == "" {
		url = startEmbedded(t).url()
	}
	_, js := jsClient(t, url)
	e := &workEnv{t: t, url: url, js: js, stream: uniq("WORK"), failStream: uniq("FAILED")}
	e.subject, e.failSubject = e.stream+".jobs", e.failStream+".jobs"
	newStream(t, js, jetstream.StreamConfig{Name: e.stream})
	newStream(t, js, jetstream.StreamConfig{Name: e.failStream})
	return e
}

func (e *workEnv) config(ackWait time.Duration) WorkConfig {
	return WorkConfig{URL: e.url, Name: e.t.Name(), Stream: e.stream, Subject: e.subject,
		FailureSubject: e.failSubject, AckWait: ackWait}
}

func (e *workEnv) driver(cfg WorkConfig) *WorkDriver {
	e.t.Helper()
	d, err := NewWorkDriver(cfg, quietLogger())
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = d.Close() })
	return d
}

// failures returns the messages of the failure stream.
func (e *workEnv) failures() []*jetstream.RawStreamMsg {
	e.t.Helper()
	ctx := context.Background()
	st, err := e.js.Stream(ctx, e.failStream)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := st.CachedInfo().State.FirstSeq; seq > 0 && seq <= st.CachedInfo().State.LastSeq; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			continue
		}
		out = append(out, m)
	}
	return out
}

// consumerInfo reads the work consumer's state.
func (e *workEnv) consumerInfo(name string) *jetstream.ConsumerInfo {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := e.js.Consumer(ctx, e.stream, name)
	if err != nil {
		e.t.Fatal(err)
	}
	return c.CachedInfo()
}

// running is a worker over a WorkDriver, with the outcomes it reported.
type runningWorker struct {
	w      *worker.Worker
	cancel context.CancelFunc
	done   chan error

	mu       sync.Mutex
	outcomes []worker.Outcome
}

func startWorker(t *testing.T, d worker.Driver, claims worker.Claims, jobs ...worker.Job) *runningWorker {
	t.Helper()
	return startWorkerWith(t, worker.Config{Driver: d, Claims: claims}, jobs...)
}

// startWorkerWith runs a worker on cfg (Driver and Claims set; a 30 s
// claim lease, 1 s drain and 5 s settle timeouts by default).
func startWorkerWith(t *testing.T, cfg worker.Config, jobs ...worker.Job) *runningWorker {
	t.Helper()
	r := &runningWorker{done: make(chan error, 1)}
	cfg.Logger = quietLogger()
	if cfg.ClaimLease == 0 {
		cfg.ClaimLease = 30 * time.Second
	}
	cfg.DrainTimeout, cfg.SettleTimeout = time.Second, 5*time.Second
	cfg.OnOutcome = func(o worker.Outcome) { r.mu.Lock(); r.outcomes = append(r.outcomes, o); r.mu.Unlock() }
	w, err := worker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if err := w.Register(j); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.w, r.cancel = w, cancel
	go func() { r.done <- w.Run(ctx) }()
	t.Cleanup(r.stop)
	return r
}

func (r *runningWorker) stop() {
	if r.cancel != nil {
		r.cancel()
		<-r.done
		r.cancel = nil
	}
}

func (r *runningWorker) results() []worker.Outcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]worker.Outcome(nil), r.outcomes...)
}

// count returns how many outcomes had result res.
func (r *runningWorker) count(res worker.Result) int {
	n := 0
	for _, o := range r.results() {
		if o.Result == res {
			n++
		}
	}
	return n
}

// effects counts a handler's runs and business effects per key.
type effects struct {
	mu       sync.Mutex
	runs     []time.Time
	done     map[string]int
	payloads map[string]string
}

func newEffects() *effects { return &effects{done: map[string]int{}, payloads: map[string]string{}} }

func (e *effects) ran() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.runs = append(e.runs, time.Now())
	return len(e.runs)
}

func (e *effects) effect(d *worker.Delivery) {
	e.mu.Lock()
	defer e.mu.Unlock()
	k := d.Header(worker.HeaderIdempotencyKey)
	e.done[k]++
	e.payloads[k] = string(d.Body)
}

func (e *effects) runCount() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.runs)
}

func (e *effects) doneCount(key string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.done[key]
}

func (e *workEnv) job(h worker.Handler) worker.Job {
	return worker.Job{Name: "build-report", Queue: e.subject, SchemaVersion: "1", Concurrency: 2,
		Backoff: worker.BackoffFunc(func(int) time.Duration { return 100 * time.Millisecond }), Handler: h}
}

func dispatch(t *testing.T, s worker.Sender, j *worker.Job, key string, payload string) {
	t.Helper()
	if err := worker.Dispatch(context.Background(), s, j, key, []byte(payload), nil); err != nil {
		t.Fatalf("Dispatch %s: %v", key, err)
	}
}

func receiveOne(t *testing.T, d *WorkDriver, within time.Duration) *worker.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	ds, err := d.Receive(ctx, 10)
	if err != nil || len(ds) != 1 {
		t.Fatalf("Receive = %d deliveries, %v; want 1", len(ds), err)
	}
	return ds[0]
}

// The driver fills a Delivery as worker/doc.go says, a retry comes back
// after its delay (not before) with the next delivery count, and Send
// publishes once per message id.
func TestWorkDriverDeliveryAndRetry(t *testing.T) {
	t.Parallel()
	e := newWorkEnv(t)
	d := e.driver(e.config(5 * time.Second))
	if lim := d.Limits(); lim.RenewEvery != 2500*time.Millisecond || lim.MaxDelay != DefaultWorkMaxDelay || lim.DelayStep != 0 {
		t.Fatalf("Limits = %+v", lim)
	}
	job := e.job(nil)
	m, err := worker.NewMessage(&job, "order-1", []byte(`{"n":1}`), &worker.DispatchOptions{Headers: map[string]string{"x-trace": "t1"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	before := time.Now()
	for range 2 { // the second is a duplicate within the stream's window
		if err := d.Send(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	other := *m
	other.Queue = "elsewhere.jobs"
	if err := d.Send(ctx, &other); quarantine.ErrorCode(err) != quarantine.EINVALID {
		t.Fatalf("Send to another subject = %v, want EINVALID", err)
	}
	st, err := e.js.Stream(ctx, e.stream)
	if err != nil {
		t.Fatal(err)
	}
	if n := st.CachedInfo().State.Msgs; n != 1 {
		t.Fatalf("the work stream holds %d messages, want 1 (Nats-Msg-Id dedupe)", n)
	}

	got := receiveOne(t, d, 10*time.Second)
	if got.ID != m.ID || got.Queue != e.subject || got.JobName != "build-report" || string(got.Body) != `{"n":1}` ||
		got.ContentType != "application/json" || got.Attempt != 1 || got.Header(worker.HeaderIdempotencyKey) != "order-1" ||
		got.Header("x-trace") != "t1" || got.Header(worker.HeaderSchemaVersion) != "1" {
		t.Fatalf("delivery %+v", got)
	}
	if got.EnqueuedAt.Before(before.Add(-time.Second)) || got.EnqueuedAt.After(time.Now()) {
		t.Fatalf("EnqueuedAt %v, want the publish time (about %v)", got.EnqueuedAt, before)
	}
	if _, ok := got.Ref.(jetstream.Msg); !ok {
		t.Fatalf("Ref is %T, want a jetstream.Msg", got.Ref)
	}
	if err := d.Extend(ctx, got); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	const delay = 1500 * time.Millisecond
	retried := time.Now()
	if err := d.Retry(ctx, got, delay); err != nil {
		t.Fatal(err)
	}
	again := receiveOne(t, d, 10*time.Second)
	if waited := time.Since(retried); waited < delay-50*time.Millisecond {
		t.Fatalf("redelivered after %s, before the retry delay of %s", waited, delay)
	}
	if again.ID != m.ID || again.Attempt != 2 {
		t.Fatalf("redelivery %+v, want attempt 2 of %s", again, m.ID)
	}
	if err := d.Retry(ctx, again, DefaultWorkMaxDelay+time.Second); err == nil {
		t.Fatal("Retry accepted a delay above MaxDelay")
	}
	if err := d.Ack(ctx, again); err != nil {
		t.Fatal(err)
	}
	if err := d.Ack(ctx, again); err == nil {
		t.Fatal("a second Ack succeeded")
	}
	eventually(t, 5*time.Second, "the consumer to drain", func() bool { return consumerDrained(t, e.js, e.stream, d.Consumer()) })
}

// A dead letter whose envelope is not confirmed settles nothing; once the
// failure stream takes it, the source is terminated (never redelivered).
func TestWorkDriverDeadLetterConfirmsFirst(t *testing.T) {
	t.Parallel()
	e := newWorkEnv(t)
	d := e.driver(e.config(2 * time.Second))
	job := e.job(nil)
	dispatch(t, d, &job, "order-1", `{}`)
	got := receiveOne(t, d, 10*time.Second)
	ctx := context.Background()
	if err := e.js.DeleteStream(ctx, e.failStream); err != nil {
		t.Fatal(err)
	}
	if err := d.DeadLetter(ctx, got, []byte(`{"envelope":1}`)); err == nil {
		t.Fatal("DeadLetter succeeded with no failure stream")
	}
	if ci := e.consumerInfo(d.Consumer()); ci.NumAckPending != 1 {
		t.Fatalf("after a refused dead letter: %d pending acks, want the delivery still unsettled", ci.NumAckPending)
	}
	newStream(t, e.js, jetstream.StreamConfig{Name: e.failStream})
	if err := d.DeadLetter(ctx, got, []byte(`{"envelope":2}`)); err != nil {
		t.Fatal(err)
	}
	fs := e.failures()
	if len(fs) != 1 || string(fs[0].Data) != `{"envelope":2}` || fs[0].Header.Get("Content-Type") != "application/json" ||
		fs[0].Header.Get(worker.HeaderJobName) != "build-report" {
		t.Fatalf("failure stream: %d messages %+v", len(fs), fs)
	}
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second) // past AckWait
	defer cancel()
	if ds, _ := d.Receive(rctx, 10); len(ds) != 0 {
		t.Fatalf("a terminated delivery came back: %+v", ds[0])
	}
	if !consumerDrained(t, e.js, e.stream, d.Consumer()) {
		t.Fatal("the consumer still holds the dead-lettered job")
	}
}

// Reject terminates by default, naks with RejectNak.
func TestWorkDriverReject(t *testing.T) {
	t.Parallel()
	e := newWorkEnv(t)
	ctx := context.Background()
	d := e.driver(e.config(2 * time.Second))
	job := e.job(nil)
	dispatch(t, d, &job, "k1", `{}`)
	if err := d.Reject(ctx, receiveOne(t, d, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	cfg := e.config(2 * time.Second)
	cfg.Consumer, cfg.RejectNak = "nakker", true
	n := e.driver(cfg)
	rej := receiveOne(t, n, 10*time.Second) // a new consumer sees the stream from the start
	if err := n.Reject(ctx, rej); err != nil {
		t.Fatal(err)
	}
	if again := receiveOne(t, n, time.Second); again.Attempt != 2 {
		t.Fatalf("redelivery after a nak: attempt %d, want 2", again.Attempt)
	}
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if ds, _ := d.Receive(rctx, 10); len(ds) != 0 {
		t.Fatal("a terminated delivery came back")
	}
}

func TestWorkConfigValidate(t *testing.T) {
	t.Parallel()
	ok := WorkConfig{URL: "nats://127.0.0.1:4222", Stream: "WORK", Subject: "work.>", FailureSubject: "failed.work"}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*WorkConfig){
		"stream":          func(c *WorkConfig) { c.Stream = "a.b" },
		"subject":         func(c *WorkConfig) { c.Subject = "" },
		"failure_subject": func(c *WorkConfig) { c.FailureSubject = "work.failed" },
		"wildcard":        func(c *WorkConfig) { c.FailureSubject = "failed.*" },
		"ack_wait":        func(c *WorkConfig) { c.AckWait = time.Millisecond },
		"max_delay":       func(c *WorkConfig) { c.MaxDelay = -1 },
		"state_bucket":    func(c *WorkConfig) { c.StateBucket = "a.b" },
	} {
		c := ok
		mut(&c)
		if err := c.Validate(); quarantine.ErrorCode(err) != quarantine.EINVALID {
			t.Errorf("%s: Validate = %v, want EINVALID", name, err)
		}
	}
}

// A job that succeeds is acked: it leaves the consumer's pending set.
func TestWorkerOverNATSCompletes(t *testing.T) {
	t.Parallel()
	e := newWorkEnv(t)
	d := e.driver(e.config(5 * time.Second))
	fx := newEffects()
	job := e.job(func(_ context.Context, _ *worker.Job, d *worker.Delivery) error {
		fx.ran()
		fx.effect(d)
		return nil
	})
	claims := worker.NewMemoryClaims(nil)
	r := startWorker(t, d, claims, job)
	dispatch(t, d, &job, "report-1", `{"n":1}`)
	eventually(t, 10*time.Second, "completion", func() bool { return r.count(worker.Completed) == 1 })
	eventually(t, 5*time.Second, "the consumer to drain", func() bool { return consumerDrained(t, e.js, e.stream, d.Consumer()) })
	if fx.doneCount("report-1") != 1 || !claims.Done("report-1") {
		t.Fatalf("effects %d, claim done %v", fx.doneCount("report-1"), claims.Done("report-1"))
	}
}

// An ordinary error (here a RetryAfter) is retried after its delay, not
// before, and then completes.
func TestWorkerOverNATSRetriesAfterDelay(t *testing.T) {
	t.Parallel()
	e := newWorkEnv(t)
	d := e.driver(e.config(5 * time.Second))
	fx := newEffects()
	const wait = 2 * time.Second
	job := e.job(func(_ context.Context, _ *worker.Job, d *worker.Delivery) error {
		if fx.ran() == 1 {
			return worker.RetryAfter(errors.New("429 from the renderer"), wait)
		}
		fx.effect(d)
		return nil
	})
	r := startWorker(t, d, worker.NewMemoryClaims(nil), job)
	dispatch(t, d, &job, "report-1", `{}`)
	eventually(t, 15*time.Second, "completion", func() bool { return r.count(worker.Completed) == 1 })
	fx.mu.Lock()
	runs := append([]time.Time(nil), fx.runs...)
	fx.mu.Unlock()
	if len(runs) != 2 || runs[1].Sub(runs[0]) < wait {
		t.Fatalf("runs at %v, want two, %s apart at least", runs, wait)
	}
	var o worker.Outcome
	for _, x := range r.results() {
		if x.Result == worker.Completed {
			o = x
		}
	}
	if o.Attempt != 2 || r.count(worker.Retried) != 1 || fx.doneCount("report-1") != 1 {
		t.Fatalf("outcomes %+v", r.results())
	}
	eventually(t, 5*time.Second, "the consumer to drain", func() bool { return consumerDrained(t, e.js, e.stream, d.Consumer()) })
}

// decodeFailures decodes every envelope of the failure stream.
func (e *workEnv) decodeFailures() []*quarantine.Message {
	e.t.Helper()
	var out []*quarantine.Message
	for _, f := range e.failures() {
		m, problems := collect.DecodeEnvelope(f.Data, collect.Origin{Source: "test", Kind: quarantine.SourceNATS})
		if len(problems) > 0 {
			e.t.Fatalf("the failure envelope does not decode: %+v\n%s", problems, f.Data)
		}
		out = append(out, m)
	}
	return out
}

// A permanent error lands on the failure stream once, as a canonical
// envelope, and the job is not redelivered.
func TestWorkerOverNATSPermanentDeadLettersOnce(t *testing.T) {
	t.Parallel()
	e := newWorkEnv(t)
	d := e.driver(e.config(time.Second))
	fx := newEffects()
	job := e.job(func(context.Context, *worker.Job, *worker.Delivery) error {
		fx.ran()
		return worker.Permanent(errors.New("the report template does not exist"))
	})
	r := startWorker(t, d, worker.NewMemoryClaims(nil), job)
	dispatch(t, d, &job, "report-1", `{"template":"nope"}`)
	eventually(t, 10*time.Second, "a dead letter", func() bool { return r.count(worker.DeadLettered) == 1 })
	// Acknowledged and nothing pending: no redelivery can come.
	eventually(t, 10*time.Second, "the consumer to drain", func() bool { return consumerDrained(t, e.js, e.stream, d.Consumer()) })
	if n := fx.runCount(); n != 1 {
		t.Fatalf("the handler ran %d times, want 1", n)
	}
	fs := e.decodeFailures()
	if len(fs) != 1 {
		t.Fatalf("%d envelopes on the failure stream, want 1", len(fs))
	}
	m := fs[0]
	if m.JobName != "build-report" || m.Queue != e.subject || m.IdempotencyKey != "report-1" || m.Attempts != 1 ||
		m.FailureClass != quarantine.ClassPermanent || string(m.Payload) != `{"template":"nope"}` || m.SchemaVersion != "1" {
		t.Fatalf("envelope %+v", m)
	}
	if !consumerDrained(t, e.js, e.stream, d.Consumer()) {
		t.Fatal("the dead-lettered job is still on the consumer")
	}
}

// Attempts never exceed MaxAttempts: the third failure dead-letters as
// exhausted (the consumer's delivery count is the attempt).
func TestWorkerOverNATSAttemptCap(t *testing.T) {
	t.Parallel()
	e := newWorkEnv(t)
	d := e.driver(e.config(time.Second))
	fx := newEffects()
	job := e.job(func(context.Context, *worker.Job, *worker.Delivery) error {
		fx.ran()
		return errors.New("renderer down")
	})
	job.MaxAttempts = 3
	r := startWorker(t, d, worker.NewMemoryClaims(nil), job)
	dispatch(t, d, &job, "report-1", `{}`)
	eventually(t, 15*time.Second, "a dead letter", func() bool { return r.count(worker.DeadLettered) == 1 })
	// Acknowledged and nothing pending: no fourth attempt can come.
	eventually(t, 10*time.Second, "the consumer to drain", func() bool { return consumerDrained(t, e.js, e.stream, d.Consumer()) })
	if n := fx.runCount(); n != 3 || r.count(worker.Retried) != 2 {
		t.Fatalf("the handler ran %d times (%d retries), want 3 (2)", n, r.count(worker.Retried))
	}
	fs := e.decodeFailures()
	if len(fs) != 1 || fs[0].FailureClass != quarantine.ClassExhausted || fs[0].Attempts != 3 || fs[0].IdempotencyKey != "report-1" {
		t.Fatalf("failure envelopes %+v", fs)
	}
	if !consumerDrained(t, e.js, e.stream, d.Consumer()) {
		t.Fatal("the exhausted job is still on the consumer")
	}
}

// A second delivery of a completed key is acked without running.
func TestWorkerOverNATSDuplicateKeyAcked(t *testing.T) {
	t.Parallel()
	e := newWorkEnv(t)
	d := e.driver(e.config(5 * time.Second))
	fx := newEffects()
	job := e.job(func(_ context.Context, _ *worker.Job, d *worker.Delivery) error {
		fx.ran()
		fx.effect(d)
		return nil
	})
	r := startWorker(t, d, worker.NewMemoryClaims(nil), job)
	dispatch(t, d, &job, "report-1", `{}`)
	eventually(t, 10*time.Second, "completion", func() bool { return r.count(worker.Completed) == 1 })
	dispatch(t, d, &job, "report-1", `{}`) // a new message id, the same business key
	eventually(t, 10*time.Second, "the duplicate", func() bool { return r.count(worker.Duplicate) == 1 })
	eventually(t, 5*time.Second, "the consumer to drain", func() bool { return consumerDrained(t, e.js, e.stream, d.Consumer()) })
	if fx.runCount() != 1 || fx.doneCount("report-1") != 1 {
		t.Fatalf("the handler ran %d times, want 1", fx.runCount())
	}
}

// InProgress keeps a handler running past AckWait: no redelivery.
func TestWorkerOverNATSInProgressKeepsLongHandler(t *testing.T) {
	t.Parallel()
	e := newWorkEnv(t)
	d := e.driver(e.config(time.Second))
	fx := newEffects()
	job := e.job(func(ctx context.Context, _ *worker.Job, d *worker.Delivery) error {
		fx.ran()
		select {
		case <-time.After(3500 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
		fx.effect(d)
		return nil
	})
	r := startWorker(t, d, worker.NewMemoryClaims(nil), job)
	dispatch(t, d, &job, "report-1", `{}`)
	eventually(t, 15*time.Second, "completion", func() bool { return r.count(worker.Completed) == 1 })
	// Acknowledged: no redelivery can come after this.
	eventually(t, 10*time.Second, "the ack", func() bool { return e.consumerInfo(d.Consumer()).NumAckPending == 0 })
	if got := r.results(); len(got) != 1 || got[0].Attempt != 1 || fx.runCount() != 1 {
		t.Fatalf("outcomes %+v, %d runs: want one completion of attempt 1", got, fx.runCount())
	}
	if ci := e.consumerInfo(d.Consumer()); ci.Delivered.Consumer != 1 || ci.NumAckPending != 0 {
		t.Fatalf("consumer delivered %d times (%d pending acks), want once", ci.Delivered.Consumer, ci.NumAckPending)
	}
}

// A worker whose connection dies after the effect and before the ack: the
// job is redelivered after AckWait to another worker, which finds the key
// done and acks it without a second effect.
func TestWorkerOverNATSCrashBeforeAck(t *testing.T) {
	t.Parallel()
	e := newWorkEnv(t)
	const ackWait = 2 * time.Second
	claims := worker.NewMemoryClaims(nil)
	fx := newEffects()
	var crashed time.Time
	a := e.driver(e.config(ackWait))
	job := e.job(func(_ context.Context, _ *worker.Job, d *worker.Delivery) error {
		fx.ran()
		crashed = time.Now() // published to the test by effect's lock
		fx.effect(d)
		_ = a.Close() // the process "dies": the ack cannot be sent
		return nil
	})
	ra := startWorker(t, a, claims, job)
	dispatch(t, e.driver(e.config(ackWait)), &job, "report-1", `{}`)
	eventually(t, 10*time.Second, "the effect", func() bool { return fx.doneCount("report-1") == 1 })
	ra.stop()
	if n := ra.count(worker.Completed); n != 0 {
		t.Fatalf("the crashed worker reported %d completions: its ack cannot have been accepted", n)
	}
	if !claims.Done("report-1") {
		t.Fatal("the claim was not completed before the ack")
	}
	b := e.driver(e.config(ackWait))
	rb := startWorker(t, b, claims, job)
	eventually(t, 15*time.Second, "the redelivery", func() bool { return rb.count(worker.Duplicate) == 1 })
	if since := time.Since(crashed); since < ackWait-100*time.Millisecond {
		t.Fatalf("redelivered %s after the crash, before AckWait (%s)", since, ackWait)
	}
	eventually(t, 5*time.Second, "the consumer to drain", func() bool { return consumerDrained(t, e.js, e.stream, b.Consumer()) })
	if fx.doneCount("report-1") != 1 || fx.runCount() != 1 {
		t.Fatalf("%d effects, %d runs: want one of each", fx.doneCount("report-1"), fx.runCount())
	}
	if o := rb.results()[0]; o.Ran || o.Attempt != 2 {
		t.Fatalf("redelivery outcome %+v, want attempt 2, handler not run", o)
	}
	if v, err := claims.Violations(context.Background()); err != nil || len(v) > 0 {
		t.Fatalf("claims: %v %v", v, err)
	}
}

// deadClaims are the claims as a dead process sees them: once dead, it
// renews, completes and releases nothing.
type deadClaims struct {
	worker.Claims
	dead *atomic.Bool
}

var errDead = errors.New("the process is dead")

func (c deadClaims) Extend(ctx context.Context, key, owner string, lease time.Duration) error {
	if c.dead.Load() {
		return errDead
	}
	return c.Claims.Extend(ctx, key, owner, lease)
}

func (c deadClaims) Complete(ctx context.Context, key, owner string) error {
	if c.dead.Load() {
		return errDead
	}
	return c.Claims.Complete(ctx, key, owner)
}

func (c deadClaims) Release(ctx context.Context, key, owner string) error {
	if c.dead.Load() {
		return errDead
	}
	return c.Claims.Release(ctx, key, owner)
}

// A worker that dies mid-handler, holding the claim and before the effect:
// the job is redelivered after AckWait; the other worker waits for the
// claim's lease to end, takes the key over and makes the one effect.
func TestWorkerOverNATSCrashMidHandler(t *testing.T) {
	t.Parallel()
	e := newWorkEnv(t)
	const ackWait, lease = 2 * time.Second, 3 * time.Second
	claims := worker.NewMemoryClaims(nil)
	fx := newEffects()
	var dead atomic.Bool
	a := e.driver(e.config(ackWait))
	var died time.Time
	stuck := e.job(func(ctx context.Context, _ *worker.Job, d *worker.Delivery) error {
		died = time.Now() // published to the test by ran's lock
		fx.ran()
		dead.Store(true)
		_ = a.Close()
		<-ctx.Done() // never reaches the effect
		return ctx.Err()
	})
	ra := startWorkerWith(t, worker.Config{Driver: a, Claims: deadClaims{claims, &dead}, ClaimLease: lease}, stuck)
	dispatch(t, e.driver(e.config(ackWait)), &stuck, "report-1", `{}`)
	eventually(t, 10*time.Second, "the first run", func() bool { return fx.runCount() == 1 })
	b := e.driver(e.config(ackWait))
	good := e.job(func(_ context.Context, _ *worker.Job, d *worker.Delivery) error {
		fx.ran()
		fx.effect(d)
		return nil
	})
	rb := startWorkerWith(t, worker.Config{Driver: b, Claims: claims, ClaimLease: lease}, good)
	eventually(t, 20*time.Second, "the takeover to complete", func() bool { return rb.count(worker.Completed) == 1 })
	if since := time.Since(died); since < lease-100*time.Millisecond {
		t.Fatalf("completed %s after the crash, before the dead worker's lease (%s) ended", since, lease)
	}
	ra.stop()
	eventually(t, 5*time.Second, "the consumer to drain", func() bool { return consumerDrained(t, e.js, e.stream, b.Consumer()) })
	if fx.doneCount("report-1") != 1 || !claims.Done("report-1") || ra.count(worker.Completed) != 0 {
		t.Fatalf("%d effects, claim done %v", fx.doneCount("report-1"), claims.Done("report-1"))
	}
	if v, err := claims.Violations(context.Background()); err != nil || len(v) > 0 {
		t.Fatalf("claims: %v %v", v, err)
	}
}

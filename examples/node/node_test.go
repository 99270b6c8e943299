// Package node_test runs the Node.js worker of this folder (worker.js)
// against the real RabbitMQ and PostgreSQL, with Go on both sides of it:
// Go producers (worker.NewMessage) dispatch the jobs, the quarantine's
// RabbitMQ collector drains the Node worker's failure envelopes into a
// SQLite store, and the replay engine sends an edited payload back to
// the Node worker.
//
// Without node and npm the tests skip, except under CI=true, where they
// fail. The npm dependencies are installed with npm ci once per run.
package node_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/broker/rabbitmq"
	"github.com/quarantine-dev/quarantine/collect"
	"github.com/quarantine-dev/quarantine/internal/pgtest"
	"github.com/quarantine-dev/quarantine/internal/testenv"
	"github.com/quarantine-dev/quarantine/replay"
	"github.com/quarantine-dev/quarantine/store/sqlite"
	"github.com/quarantine-dev/quarantine/worker"
)

// envAMQPURL points the tests at a broker (the project's private node,
// as in broker/rabbitmq's tests).
const envAMQPURL = testenv.AMQPURL

func amqpURL() string { return testenv.Lookup(envAMQPURL) }

// missing skips t, or fails it under CI=true.
func missing(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

var (
	npmOnce sync.Once
	npmErr  error
	npmOut  []byte
)

// needNode checks node and npm and installs the npm dependencies (npm ci)
// once per run.
func needNode(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing(t, "%s is not installed (required under CI=true): %v", tool, err)
		}
	}
	npmOnce.Do(func() {
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--prefer-offline")
		npmOut, npmErr = cmd.CombinedOutput()
	})
	if npmErr != nil {
		t.Fatalf("npm ci: %v\n%s", npmErr, npmOut)
	}
}

// broker is a setup connection that declares the test's queues (deleted
// at cleanup) and publishes with confirms.
type broker struct {
	t    *testing.T
	conn *amqp.Connection
	ch   *amqp.Channel
}

func newBroker(t *testing.T) *broker {
	t.Helper()
	if amqpURL() == "" {
		testenv.Unavailable(t, envAMQPURL, "RabbitMQ is not configured")
	}
	conn, err := amqp.DialConfig(amqpURL(), amqp.Config{Dial: amqp.DefaultDial(3 * time.Second)})
	if err != nil {
		missing(t, "RabbitMQ does not answer (set %s, or run scripts/services.sh): %v", envAMQPURL, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	return &broker{t: t, conn: conn, ch: ch}
}

// queues declares a work queue and a failure queue with names unique to
// this run, and deletes them and the work queue's small delay queues at
// cleanup.
func (b *broker) queues() (work, failure string) {
	b.t.Helper()
	r := make([]byte, 4)
	_, _ = rand.Read(r)
	base := "qt.node." + strings.ReplaceAll(b.t.Name(), "/", "-") + "." + hex.EncodeToString(r)
	work, failure = base+".work", base+".failed"
	for _, q := range []string{work, failure} {
		if _, err := b.ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
			b.t.Fatalf("declare %s: %v", q, err)
		}
	}
	b.t.Cleanup(func() {
		conn, err := amqp.Dial(amqpURL())
		if err != nil {
			return
		}
		defer conn.Close()
		del := []string{work, failure}
		for _, d := range rabbitmq.DefaultDelayBuckets[:6] {
			del = append(del, rabbitmq.DelayQueueName(work, d))
		}
		for _, q := range del {
			ch, err := conn.Channel() // deleting a missing queue may close a channel
			if err != nil {
				return
			}
			_, _ = ch.QueueDelete(q, false, false, false)
			_ = ch.Close()
		}
	})
	return work, failure
}

// dispatch publishes the message worker.NewMessage builds for job, the
// way the Go driver's Send does (headers as strings, message_id, type,
// timestamp, persistent), and waits for the confirm. withType false
// leaves the AMQP type out: the job name then travels only in the
// x-quarantine-job-name header.
func (b *broker) dispatch(job *worker.Job, key string, payload any, withType bool) *worker.Message {
	b.t.Helper()
	m, err := worker.NewMessage(job, key, payload, nil)
	if err != nil {
		b.t.Fatal(err)
	}
	h := amqp.Table{}
	for k, v := range m.Headers {
		h[k] = v
	}
	p := amqp.Publishing{Headers: h, ContentType: m.ContentType, DeliveryMode: amqp.Persistent,
		MessageId: m.ID, Timestamp: time.Now().UTC().Truncate(time.Second), Body: m.Body}
	if withType {
		p.Type = m.JobName
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := b.ch.PublishWithDeferredConfirmWithContext(ctx, "", m.Queue, true, false, p)
	if err != nil {
		b.t.Fatal(err)
	}
	if ok, err := c.WaitContext(ctx); err != nil || !ok {
		b.t.Fatalf("publish %s not confirmed: %v", key, err)
	}
	return m
}

// depth returns the number of ready messages in q.
func (b *broker) depth(q string) int {
	b.t.Helper()
	ch, err := b.conn.Channel()
	if err != nil {
		b.t.Fatal(err)
	}
	defer ch.Close()
	s, err := ch.QueueDeclarePassive(q, true, false, false, false, nil)
	if err != nil {
		b.t.Fatal(err)
	}
	return s.Messages
}

// peek gets the next message of q and puts it back (nack, requeue).
func (b *broker) peek(q string, within time.Duration) amqp.Delivery {
	b.t.Helper()
	ch, err := b.conn.Channel()
	if err != nil {
		b.t.Fatal(err)
	}
	defer ch.Close()
	deadline := time.Now().Add(within)
	for {
		d, ok, err := ch.Get(q, false)
		if err != nil {
			b.t.Fatal(err)
		}
		if ok {
			if err := d.Nack(false, true); err != nil {
				b.t.Fatal(err)
			}
			return d
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("nothing on %s within %s", q, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// event is one JSON log line of the Node worker.
type event struct {
	Msg     string `json:"msg"`
	Key     string `json:"key"`
	Job     string `json:"job"`
	Attempt int    `json:"attempt"`
	Class   string `json:"class"`
	Reason  string `json:"reason"`
	Target  string `json:"target"`
	DelayMS int    `json:"delay_ms"`
}

// nodeWorker is the worker.js child process.
type nodeWorker struct {
	t      *testing.T
	mu     sync.Mutex
	events []event
}

// startNode starts worker.js on work/failure with claims at dbURL, plus
// env, and waits for its "ready" line. It is stopped (SIGTERM) at cleanup.
func startNode(t *testing.T, work, failure, dbURL string, env ...string) *nodeWorker {
	t.Helper()
	cmd := exec.Command("node", "worker.js")
	cmd.Env = append(os.Environ(),
		"AMQP_URL="+amqpURL(), "WORK_QUEUE="+work, "FAILURE_QUEUE="+failure,
		"CLAIMS_DATABASE_URL="+dbURL, "PREFETCH=4")
	cmd.Env = append(cmd.Env, env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &nodeWorker{t: t}
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			line := sc.Text()
			t.Log("node:", line)
			var e event
			if json.Unmarshal([]byte(line), &e) == nil {
				w.mu.Lock()
				w.events = append(w.events, e)
				w.mu.Unlock()
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	exited := make(chan error, 1)
	go func() { <-read; exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("the node worker exited with %v; stderr:\n%s", err, stderr.String())
			}
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("the node worker did not stop on SIGTERM; stderr:\n%s", stderr.String())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for len(w.find(func(e event) bool { return e.Msg == "ready" })) == 0 {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("the node worker exited before it was ready (%v); stderr:\n%s", err, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node worker was not ready within 30 s; stderr:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return w
}

func (w *nodeWorker) find(pred func(event) bool) []event {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []event
	for _, e := range w.events {
		if pred(e) {
			out = append(out, e)
		}
	}
	return out
}

// wait returns the first n events matching msg and key, failing after within.
func (w *nodeWorker) wait(msg, key string, n int, within time.Duration) []event {
	w.t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := w.find(func(e event) bool { return e.Msg == msg && e.Key == key })
		if len(got) >= n {
			return got[:n]
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("%d %q events for key %s within %s, want %d", len(got), msg, key, within, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// effects reads the demo handler's effects per key from the claims database.
func effects(t *testing.T, dbURL string) map[string]int {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT key, n FROM effects`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for rows.Next() {
		var k string
		var n int
		if err := rows.Scan(&k, &n); err != nil {
			t.Fatal(err)
		}
		out[k] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// proof runs worker.ProofQuery (one terminal result per key) on the
// Node worker's claims table and fails t on any row.
func proof(t *testing.T, dbURL string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, worker.ProofQuery)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var key, state string
		var n int
		if err := rows.Scan(&key, &state, &n); err != nil {
			t.Fatal(err)
		}
		t.Errorf("proof query: key %s is %s with %d completions", key, state, n)
	}
}

// claimState returns the state of key in worker_claims.
func claimState(t *testing.T, dbURL, key string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var s string
	if err := conn.QueryRow(ctx, `SELECT state FROM worker_claims WHERE key = $1`, key).Scan(&s); err != nil {
		t.Fatalf("claim %s: %v", key, err)
	}
	return s
}

// decodeEnvelope decodes a failure envelope and checks that it has no
// problems and that Go writes the very same bytes from what it decoded.
func decodeEnvelope(t *testing.T, raw []byte) *quarantine.Message {
	t.Helper()
	m, problems := collect.DecodeEnvelope(raw, collect.Origin{Source: "rmq", Kind: quarantine.SourceRabbitMQ})
	if len(problems) != 0 {
		t.Fatalf("collect.DecodeEnvelope: %v\n%s", problems, raw)
	}
	again, err := quarantine.MarshalEnvelope(m, m.Payload, m.Headers)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, raw) {
		t.Errorf("the Node envelope is not canonical:\nnode: %s\ngo:   %s", raw, again)
	}
	return m
}

func testLogger(t *testing.T) *slog.Logger {
	if !testing.Verbose() {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

type report struct {
	Account          string `json:"account"`
	Month            string `json:"month"`
	Format           string `json:"format"`
	FailUntilAttempt int    `json:"fail_until_attempt,omitempty"`
}

// TestNodeWorkerQuarantineEditReplay: a Go producer dispatches a poison
// build-report job; the Node worker dead-letters it as a canonical
// envelope; the RabbitMQ collector stores it; the payload is edited and
// replayed; the Node worker completes it once, and a later duplicate
// delivery of the key is acked without a second effect.
func TestNodeWorkerQuarantineEditReplay(t *testing.T) {
	t.Parallel()
	needNode(t)
	b := newBroker(t)
	dbURL := pgtest.URL(t)
	work, failure := b.queues()
	nw := startNode(t, work, failure, dbURL)
	job := &worker.Job{Name: "build-report", Queue: work, SchemaVersion: "1"}
	const key = "report-acme-2026-11"

	// A good job (AMQP type) and a poison one (job name in the header only).
	b.dispatch(job, "report-beta-2026-11", report{Account: "beta", Month: "2026-11", Format: "csv"}, true)
	sent := b.dispatch(job, key, report{Account: "acme", Month: "2026-11", Format: "docx"}, false)
	nw.wait("completed", "report-beta-2026-11", 1, 30*time.Second)
	if dl := nw.wait("dead_lettered", key, 1, 30*time.Second)[0]; dl.Class != "permanent" || dl.Attempt != 1 {
		t.Fatalf("dead-lettered %+v, want permanent at attempt 1", dl)
	}
	if s := claimState(t, dbURL, key); s != "released" {
		t.Errorf("the poison key's claim is %s, want released (so that a replay runs)", s)
	}

	// The envelope on the failure queue, as Go reads it.
	d := b.peek(failure, 10*time.Second)
	if d.ContentType != "application/json" || d.MessageId != sent.ID || d.Headers[worker.HeaderIdempotencyKey] != key {
		t.Errorf("failure message content type %q, message id %q (sent %q), headers %v", d.ContentType, d.MessageId, sent.ID, d.Headers)
	}
	env := decodeEnvelope(t, d.Body)
	switch {
	case env.MessageID != sent.ID || env.JobName != "build-report" || env.Queue != work || env.IdempotencyKey != key:
		t.Errorf("envelope job id %q name %q queue %q key %q", env.MessageID, env.JobName, env.Queue, env.IdempotencyKey)
	case env.SchemaVersion != "1" || env.Attempts != 1 || env.ContentType != "application/json":
		t.Errorf("envelope schema %q attempts %d content type %q", env.SchemaVersion, env.Attempts, env.ContentType)
	case env.FailureClass != quarantine.ClassPermanent || !strings.Contains(env.Reason, "docx"):
		t.Errorf("envelope class %q reason %q", env.FailureClass, env.Reason)
	case !bytes.Equal(env.Payload, sent.Body):
		t.Errorf("envelope payload %s, sent %s", env.Payload, sent.Body)
	case env.EnqueuedAt == nil || env.FailedAt.IsZero() || env.FirstFailedAt == nil || env.FailedAt.Before(*env.EnqueuedAt):
		t.Errorf("envelope times enqueued %v failed %v first failed %v", env.EnqueuedAt, env.FailedAt, env.FirstFailedAt)
	}
	for k, v := range sent.Headers {
		if env.Headers[k] != v {
			t.Errorf("envelope header %s = %q, sent %q", k, env.Headers[k], v)
		}
	}
	if _, ok := env.Headers[worker.HeaderAttempts]; ok {
		t.Errorf("the envelope keeps the worker's bookkeeping header %s", worker.HeaderAttempts)
	}

	// The collector drains the failure queue into the quarantine.
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "q.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	src, err := rabbitmq.NewSource("rmq", rabbitmq.Config{URL: amqpURL(), Queue: failure}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	c := collect.New(collect.Config{Name: "rmq", Source: src, Store: st, BatchSize: 10, Linger: 20 * time.Millisecond,
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 500 * time.Millisecond, Logger: testLogger(t),
		Preparer: &collect.Preparer{Idempotency: []collect.IdempotencyRule{{Queues: []string{"*"}, Header: worker.HeaderIdempotencyKey}}}})
	cctx, stopCollect := context.WithCancel(ctx)
	collected := make(chan error, 1)
	go func() { collected <- c.Run(cctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for c.Stats().Stored < 1 {
		if time.Now().After(deadline) {
			s := c.Stats()
			t.Fatalf("the collector stored %d within 30 s (errors %v, last %q)", s.Stored, s.Errors, s.LastError)
		}
		time.Sleep(20 * time.Millisecond)
	}
	stopCollect()
	if err := <-collected; err != nil {
		t.Errorf("collector: %v", err)
	}
	_ = src.Close()
	page, err := st.ListMessages(ctx, quarantine.Filter{Source: []string{"rmq"}, Limit: quarantine.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Messages) != 1 {
		t.Fatalf("%d messages stored, want 1", len(page.Messages))
	}
	m, err := st.GetMessage(ctx, page.Messages[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case m.JobName != "build-report" || m.Queue != work || m.IdempotencyKey != key:
		t.Fatalf("quarantined job %q queue %q key %q", m.JobName, m.Queue, m.IdempotencyKey)
	case m.FailureClass != quarantine.ClassPermanent || m.Attempts != 1 || !strings.Contains(m.Reason, "docx"):
		t.Fatalf("quarantined class %q attempts %d reason %q", m.FailureClass, m.Attempts, m.Reason)
	case !bytes.Equal(m.Payload, sent.Body):
		t.Fatalf("quarantined payload %s", m.Payload)
	}

	// The operator fixes the format and replays it to the Node worker.
	fixed, _ := json.Marshal(report{Account: "acme", Month: "2026-11", Format: "pdf"})
	if _, err := st.EditPayload(ctx, quarantine.PayloadEdit{MessageID: m.ID, IfMatch: m.PayloadSHA256, Payload: fixed,
		Reason: "format pdf: docx is not offered", Actor: "token:alice"}); err != nil {
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
	pub := rabbitmq.NewPublisher(rabbitmq.Config{URL: amqpURL()}, "rmq", testLogger(t))
	t.Cleanup(func() { _ = pub.Close() })
	engine := replay.New(replay.Config{Store: st, Poll: 20 * time.Millisecond, Logger: testLogger(t),
		Router: &replay.Routes{Brokers: map[string]replay.Broker{"rmq": {Name: "rmq", Kind: "rabbitmq", Publisher: pub}}}})
	ectx, stopEngine := context.WithCancel(ctx)
	engineDone := make(chan struct{})
	go func() { defer close(engineDone); _ = engine.Run(ectx) }()
	t.Cleanup(func() { stopEngine(); <-engineDone })

	if done := nw.wait("completed", key, 1, 30*time.Second)[0]; done.Attempt != 1 {
		t.Errorf("the replay completed at attempt %d, want 1 (a replay starts again)", done.Attempt)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		rb, err := st.GetReplay(ctx, batch.ID)
		if err != nil {
			t.Fatal(err)
		}
		if rb.State == quarantine.ReplayCompleted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replay %s is %s (%+v)", rb.ID, rb.State, rb.Counts)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// A second delivery of the same key (a producer retrying, a replay
	// published twice) is acked without a second effect.
	b.dispatch(job, key, report{Account: "acme", Month: "2026-11", Format: "pdf"}, true)
	nw.wait("duplicate", key, 1, 30*time.Second)

	if got := effects(t, dbURL); got[key] != 1 || got["report-beta-2026-11"] != 1 || len(got) != 2 {
		t.Errorf("effects per key %v, want %s and report-beta-2026-11 once each", got, key)
	}
	if s := claimState(t, dbURL, key); s != "done" {
		t.Errorf("the key's claim is %s, want done", s)
	}
	proof(t, dbURL)
	if n := len(nw.find(func(e event) bool { return e.Msg == "dead_lettered" })); n != 1 {
		t.Errorf("%d dead-letters, want the poison one only", n)
	}
	if n := b.depth(failure); n != 0 {
		t.Errorf("%d messages left on the failure queue", n)
	}
	if n := b.depth(work); n != 0 {
		t.Errorf("%d messages left on the work queue", n)
	}
}

// TestNodeWorkerRetryAndExhaust: transient failures go through the
// per-delay TTL queue back to the work queue with x-quarantine-attempts
// counting, then complete once; a job that keeps failing is dead-lettered
// as exhausted at the attempt cap with first_failed_at kept.
func TestNodeWorkerRetryAndExhaust(t *testing.T) {
	t.Parallel()
	needNode(t)
	b := newBroker(t)
	dbURL := pgtest.URL(t)
	work, failure := b.queues()
	nw := startNode(t, work, failure, dbURL, "MAX_ATTEMPTS=3", "BACKOFF_INITIAL_MS=200", "BACKOFF_MAX_MS=240")
	job := &worker.Job{Name: "build-report", Queue: work, SchemaVersion: "1"}

	b.dispatch(job, "flaky", report{Account: "acme", Month: "2026-10", Format: "pdf", FailUntilAttempt: 3}, true)
	b.dispatch(job, "broken", report{Account: "acme", Month: "2026-09", Format: "pdf", FailUntilAttempt: 99}, true)

	if done := nw.wait("completed", "flaky", 1, 30*time.Second)[0]; done.Attempt != 3 {
		t.Errorf("flaky completed at attempt %d, want 3", done.Attempt)
	}
	retries := nw.wait("retried", "flaky", 2, time.Second)
	for i, r := range retries {
		if r.Attempt != i+1 || r.Class != "error" {
			t.Errorf("retry %d: %+v", i, r)
		}
		if r.DelayMS != 0 && r.Target != rabbitmq.DelayQueueName(work, 250*time.Millisecond) {
			t.Errorf("retry %d went to %s after %d ms, want the 250 ms delay queue", i, r.Target, r.DelayMS)
		}
	}

	dl := nw.wait("dead_lettered", "broken", 1, 30*time.Second)[0]
	if dl.Class != "exhausted" || dl.Attempt != 3 {
		t.Errorf("broken dead-lettered %+v, want exhausted at attempt 3", dl)
	}
	env := decodeEnvelope(t, b.peek(failure, 10*time.Second).Body)
	switch {
	case env.FailureClass != quarantine.ClassExhausted || env.Attempts != 3 || !strings.Contains(env.Reason, "attempt 3 of 3"):
		t.Errorf("envelope class %q attempts %d reason %q", env.FailureClass, env.Attempts, env.Reason)
	case env.FirstFailedAt == nil || !env.FirstFailedAt.Before(env.FailedAt):
		t.Errorf("envelope first failed %v, failed %v: the first failure should be kept", env.FirstFailedAt, env.FailedAt)
	}
	if _, ok := env.Headers[worker.HeaderFirstFailedAt]; ok {
		t.Errorf("the envelope keeps the worker's bookkeeping header %s", worker.HeaderFirstFailedAt)
	}
	if got := effects(t, dbURL); got["flaky"] != 1 || got["broken"] != 0 {
		t.Errorf("effects %v, want flaky once and broken never", got)
	}
	if s := claimState(t, dbURL, "broken"); s != "released" {
		t.Errorf("the exhausted key's claim is %s, want released", s)
	}
	proof(t, dbURL)
}

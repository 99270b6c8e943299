package rabbitmq

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
	"github.com/quarantine-dev/quarantine/internal/redacturl"
	"github.com/quarantine-dev/quarantine/internal/testenv"
	"github.com/quarantine-dev/quarantine/store/sqlite"
)

// EnvAMQPURL points the tests at a broker: the project's private node,
// which scripts/services.sh records (internal/testenv).
const EnvAMQPURL = testenv.AMQPURL

// testURL is the broker's URL, or "" when none is configured (newBroker
// then skips, or fails under CI=true).
func testURL() string { return testenv.Lookup(EnvAMQPURL) }

// testBroker is a setup connection to the real broker: it declares the
// test's queues (deleted when the test ends) and publishes with confirms.
type testBroker struct {
	t    testing.TB
	url  string
	conn *amqp.Connection
	ch   *amqp.Channel
	mu   sync.Mutex
}

// newBroker connects to RabbitMQ, or skips the test (fails it under
// CI=true) when the broker does not answer.
func newBroker(t testing.TB) *testBroker {
	t.Helper()
	if testURL() == "" {
		testenv.Unavailable(t, EnvAMQPURL, "RabbitMQ is not configured")
	}
	return newBrokerAt(t, testURL())
}

// newBrokerAt is newBroker on the node at u (a private node).
func newBrokerAt(t testing.TB, u string) *testBroker {
	t.Helper()
	conn, err := amqp.DialConfig(u, amqp.Config{Dial: amqp.DefaultDial(3 * time.Second)})
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("RabbitMQ is required under CI=true but %s does not answer: %v", redacturl.URL(u), err)
		}
		t.Skipf("RabbitMQ does not answer at %s (set %s, or run scripts/services.sh rabbitmq): %v", redacturl.URL(u), EnvAMQPURL, err)
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	b := &testBroker{t: t, url: u, conn: conn, ch: ch}
	t.Cleanup(func() { _ = conn.Close() })
	return b
}

// name returns a queue name unique to this run.
func (b *testBroker) name(prefix string) string {
	r := make([]byte, 4)
	_, _ = rand.Read(r)
	s := regexp.MustCompile(`[^a-zA-Z0-9]+`).ReplaceAllString(b.t.Name(), "-")
	if len(s) > 60 {
		s = s[len(s)-60:]
	}
	return "qt." + prefix + "." + s + "." + hex.EncodeToString(r)
}

// declare declares a durable queue with args, deleted at cleanup.
func (b *testBroker) declare(name string, args amqp.Table) string {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, err := b.ch.QueueDeclare(name, true, false, false, false, args); err != nil {
		b.t.Fatalf("declare %s: %v", name, err)
	}
	b.deleteAtCleanup(name)
	return name
}

// deleteAtCleanup deletes queue name when the test ends.
func (b *testBroker) deleteAtCleanup(name string) {
	b.t.Cleanup(func() {
		conn, err := amqp.Dial(b.url)
		if err != nil {
			return
		}
		defer conn.Close()
		if ch, err := conn.Channel(); err == nil {
			_, _ = ch.QueueDelete(name, false, false, false)
		}
	})
}

// failureQueue declares a classic (or quorum, with args) failure queue.
func (b *testBroker) failureQueue(args amqp.Table) string {
	return b.declare(b.name("dlq"), args)
}

// workQueue declares a queue that dead-letters into dlq, with more args.
func (b *testBroker) workQueue(dlq string, args amqp.Table) string {
	a := amqp.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq}
	for k, v := range args {
		a[k] = v
	}
	return b.declare(b.name("work"), a)
}

// publish sends msgs to queue through the default exchange and waits for
// the broker's confirms.
func (b *testBroker) publish(queue string, msgs ...amqp.Publishing) {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var pending []*amqp.DeferredConfirmation
	flush := func() {
		for _, c := range pending {
			ok, err := c.WaitContext(ctx)
			if err != nil || !ok {
				b.t.Fatalf("publish to %s not confirmed: %v", queue, err)
			}
		}
		pending = pending[:0]
	}
	for _, m := range msgs {
		if m.DeliveryMode == 0 {
			m.DeliveryMode = amqp.Persistent
		}
		c, err := b.ch.PublishWithDeferredConfirmWithContext(ctx, "", queue, true, false, m)
		if err != nil {
			b.t.Fatalf("publish to %s: %v", queue, err)
		}
		pending = append(pending, c)
		if len(pending) >= 500 {
			flush()
		}
	}
	flush()
}

// depth returns the ready messages of queue (unacknowledged ones are not
// counted: close the consumers first).
func (b *testBroker) depth(queue string) int {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	q, err := b.ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		b.t.Fatalf("inspect %s: %v", queue, err)
	}
	return q.Messages
}

// consumers returns the consumers of queue, or -1 while it does not
// exist (each look uses its own channel: a passive declare of a missing
// queue closes the channel).
func (b *testBroker) consumers(queue string) int {
	ch, err := b.conn.Channel()
	if err != nil {
		return -1
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		return -1
	}
	return q.Consumers
}

// waitConsumer waits until queue exists and has a consumer; false when
// it has none after 30 s. It does not fail the test, so that goroutines
// may call it.
func (b *testBroker) waitConsumer(queue string) bool {
	for deadline := time.Now().Add(30 * time.Second); b.consumers(queue) < 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// waitDepth waits until queue holds n ready messages.
func (b *testBroker) waitDepth(queue string, n int) {
	b.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		d := b.depth(queue)
		if d == n {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("queue %s holds %d messages, want %d", queue, d, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// settle consumes every message of queue with a separate channel and
// rejects (requeue=false) or nacks them with requeue, as a worker does.
func (b *testBroker) settle(queue string, n int, requeue bool) {
	b.t.Helper()
	ch, err := b.conn.Channel()
	if err != nil {
		b.t.Fatal(err)
	}
	defer ch.Close()
	if err := ch.Qos(100, 0, false); err != nil {
		b.t.Fatal(err)
	}
	ds, err := ch.Consume(queue, "", false, false, false, false, nil)
	if err != nil {
		b.t.Fatal(err)
	}
	timeout := time.After(30 * time.Second)
	for i := 0; i < n; i++ {
		select {
		case d := <-ds:
			if err := d.Nack(false, requeue); err != nil {
				b.t.Fatal(err)
			}
		case <-timeout:
			b.t.Fatalf("settled %d of %d messages of %s", i, n, queue)
		}
	}
}

// testSource returns a Source on queue, closed at cleanup.
func testSource(t testing.TB, name, queue string, mod func(*Config)) *Source {
	t.Helper()
	c := Config{URL: testURL(), Queue: queue}
	if mod != nil {
		mod(&c)
	}
	s, err := NewSource(name, c, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// testLogger logs to the test output when -v is given.
func testLogger(t testing.TB) *slog.Logger {
	if !testing.Verbose() {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

var _ io.Writer = testWriter{}

// testStore opens a migrated SQLite store in the test's directory.
func testStore(t testing.TB) *sqlite.Store {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "q.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// lister is the part of a store the tests read back.
type lister interface {
	ListMessages(ctx context.Context, f quarantine.Filter) (quarantine.MessagePage, error)
}

// stored returns every message the collector called source stored.
func stored(t testing.TB, st lister, source string) []*quarantine.Message {
	t.Helper()
	var out []*quarantine.Message
	f := quarantine.Filter{Source: []string{source}, Limit: quarantine.MaxLimit}
	for {
		page, err := st.ListMessages(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page.Messages...)
		if page.Next == nil {
			return out
		}
		f.After = page.Next
	}
}

// runCollector runs a collector on src into st until the returned stop
// function is called; stop waits for Run to return and closes src.
func runCollector(t testing.TB, name string, src collect.Source, st collect.Inserter, batch int) (*collect.Collector, func()) {
	t.Helper()
	c := collect.New(collect.Config{Name: name, Source: src, Store: st, BatchSize: batch, Linger: 20 * time.Millisecond,
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 500 * time.Millisecond, Logger: testLogger(t),
		Preparer: &collect.Preparer{Idempotency: []collect.IdempotencyRule{{Queues: []string{"*"}, Header: "x-idempotency-key"}}}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("collector %s: %v", name, err)
			}
			_ = src.Close()
		})
	}
	t.Cleanup(stop)
	return c, stop
}

// waitStored waits until the collector's stats count n stored messages.
func waitStored(t testing.TB, c *collect.Collector, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		s := c.Stats()
		if int(s.Stored) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("collector %s stored %d of %d within %s (errors %v, last %q)", s.Name, s.Stored, n, within, s.Errors, s.LastError)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// rabbitmqctl runs rabbitmqctl. When it is missing or cannot reach the
// node (a broker elsewhere, no access to the Erlang cookie), the test
// skips, or fails under CI=true.
func rabbitmqctl(t testing.TB, args ...string) string {
	t.Helper()
	skip := t.Skipf
	if os.Getenv("CI") == "true" {
		skip = t.Fatalf
	}
	path, err := exec.LookPath("rabbitmqctl")
	if err != nil {
		skip("rabbitmqctl is not installed: %v", err)
	}
	cmd := exec.Command(path, append(nodeArgs(t), args...)...)
	cmd.Env = ctlEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		skip("rabbitmqctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// nodeArgs names the test broker's node for rabbitmqctl and
// rabbitmq-plugins (-n NODE), from internal/testenv.
func nodeArgs(t testing.TB) []string {
	t.Helper()
	return []string{"-n", testenv.Require(t, testenv.RabbitMQNode, "the RabbitMQ node's name")}
}

// ctlEnv is the environment of rabbitmqctl: the node's own epmd port, so
// that the CLI finds the project's private node (and nodes of the tests'
// own register with that epmd, which scripts/services.sh stop ends).
func ctlEnv() []string { return append(os.Environ(), ctlVars()...) }

// ctlVars are the variables ctlEnv adds to the environment.
func ctlVars() []string {
	vars := []string{"ERL_EPMD_ADDRESS=127.0.0.1", "ERL_FLAGS=-kernel inet_dist_use_interface {127,0,0,1}"}
	if p := testenv.Lookup(testenv.EPMDPort); p != "" {
		vars = append(vars, "ERL_EPMD_PORT="+p)
	}
	return vars
}

// closeConnections makes the broker close every connection whose name
// (client property connection_name) starts with "quarantine collector
// "+collector, and returns how many it closed.
func closeConnections(t testing.TB, collector string) int {
	t.Helper()
	out := rabbitmqctl(t, "list_connections", "-q", "--no-table-headers", "pid", "client_properties")
	want := fmt.Sprintf(`"quarantine collector %s"`, collector)
	n := 0
	for _, line := range strings.Split(out, "\n") {
		pid, props, ok := strings.Cut(line, "\t")
		if !ok || !strings.Contains(props, want) {
			continue
		}
		rabbitmqctl(t, "close_connection", strings.TrimSpace(pid), "test: broker-side close")
		n++
	}
	return n
}

package rabbitmq

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
)

// numbered returns n publishings with bodies "<prefix>-00000"…
func numbered(prefix string, n int, mod func(i int, p *amqp.Publishing)) []amqp.Publishing {
	out := make([]amqp.Publishing, n)
	for i := range out {
		out[i] = amqp.Publishing{Body: fmt.Appendf(nil, "%s-%05d", prefix, i)}
		if mod != nil {
			mod(i, &out[i])
		}
	}
	return out
}

// receiveN receives until n deliveries arrived.
func receiveN(t *testing.T, s *Source, n, max int) []collect.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []collect.Delivery
	for len(out) < n {
		ds, err := s.Receive(ctx, min(max, n-len(out)), 50*time.Millisecond)
		if err != nil {
			t.Fatalf("receive after %d of %d: %v", len(out), n, err)
		}
		out = append(out, ds...)
	}
	return out
}

func bodies(ds []collect.Delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = string(d.Message.Payload)
	}
	slices.Sort(out)
	return out
}

func TestSourceNativeDeadLetters(t *testing.T) {
	t.Parallel()
	b := newBroker(t)
	dlq := b.failureQueue(nil)

	rejected := b.workQueue(dlq, nil)
	b.publish(rejected, amqp.Publishing{Body: []byte("rejected"), MessageId: "r-1", Type: "charge",
		Timestamp: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), ContentType: "text/plain"})
	b.settle(rejected, 1, false)
	expired := b.workQueue(dlq, amqp.Table{"x-message-ttl": int32(0)})
	b.publish(expired, amqp.Publishing{Body: []byte("expired")})
	maxlen := b.workQueue(dlq, amqp.Table{"x-max-length": int32(1)})
	b.publish(maxlen, amqp.Publishing{Body: []byte("maxlen")}, amqp.Publishing{Body: []byte("kept")})
	limited := b.workQueue(dlq, amqp.Table{"x-queue-type": "quorum", "x-delivery-limit": int32(1)})
	b.publish(limited, amqp.Publishing{Body: []byte("delivery_limit")})
	b.settle(limited, 2, true) // requeued twice: the second exceeds the limit
	b.waitDepth(dlq, 4)

	start := time.Now().Add(-time.Minute)
	s := testSource(t, "native", dlq, nil)
	ds := receiveN(t, s, 4, 10)
	byBody := map[string]*quarantine.Message{}
	for _, d := range ds {
		byBody[string(d.Message.Payload)] = d.Message
	}
	want := []struct {
		body, queue string
		class       quarantine.FailureClass
		reason      string
	}{
		{"rejected", rejected, quarantine.ClassRejected, "rejected from queue " + rejected + " (x-death count 1)"},
		{"expired", expired, quarantine.ClassExpired, "expired from queue " + expired + " (x-death count 1)"},
		{"maxlen", maxlen, quarantine.ClassOverflow, "maxlen from queue " + maxlen + " (x-death count 1)"},
		{"delivery_limit", limited, quarantine.ClassDeliveryLimit, "delivery_limit from queue " + limited + " (x-death count 1)"},
	}
	for _, w := range want {
		m := byBody[w.body]
		if m == nil {
			t.Fatalf("no message %q among %v", w.body, bodies(ds))
		}
		if m.Queue != w.queue || m.FailureClass != w.class || m.Reason != w.reason || m.Attempts != 1 {
			t.Errorf("%s: queue %q class %s reason %q attempts %d", w.body, m.Queue, m.FailureClass, m.Reason, m.Attempts)
		}
		if m.FailedAt.Before(start) || m.FailedAt.After(time.Now().Add(time.Minute)) || len(m.Flags) != 0 {
			t.Errorf("%s: failed at %v flags %v", w.body, m.FailedAt, m.Flags)
		}
		if m.Source != "native" || m.SourceKind != quarantine.SourceRabbitMQ || m.Headers["x-first-death-queue"] != w.queue {
			t.Errorf("%s: source %q/%q headers %v", w.body, m.Source, m.SourceKind, m.Headers)
		}
	}
	r := byBody["rejected"]
	if r.MessageID != "r-1" || r.JobName != "charge" || r.ContentType != "text/plain" || r.EnqueuedAt == nil ||
		!r.EnqueuedAt.Equal(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) || !strings.HasPrefix(r.DedupeKey, "mid:r-1/xdeath:1:") {
		t.Errorf("properties lost: %+v", r)
	}
	if err := s.Ack(context.Background(), ds); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	b.waitDepth(dlq, 0)
}

// lengthLimited declares a queue that holds at most max messages and
// drops the oldest (x-overflow drop-head) into a fanout dead-letter
// exchange bound to dlq, as a deployment with a DLX does (the messages
// keep their routing key, the work queue's name).
func lengthLimited(b *testBroker, dlq string, max int32) string {
	b.t.Helper()
	dlx := b.name("dlx")
	b.mu.Lock()
	err := b.ch.ExchangeDeclare(dlx, amqp.ExchangeFanout, false, false, false, false, nil)
	if err == nil {
		err = b.ch.QueueBind(dlq, "", dlx, false, nil)
	}
	b.mu.Unlock()
	if err != nil {
		b.t.Fatalf("dead-letter exchange %s: %v", dlx, err)
	}
	b.t.Cleanup(func() {
		if conn, err := amqp.Dial(b.url); err == nil {
			defer conn.Close()
			if ch, err := conn.Channel(); err == nil {
				_ = ch.ExchangeDelete(dlx, false, false)
			}
		}
	})
	return b.declare(b.name("work"), amqp.Table{"x-dead-letter-exchange": dlx, "x-max-length": max, "x-overflow": "drop-head"})
}

// TestSourceLengthLimitIsOverflow: a message that a full queue's
// x-max-length drops is classed overflow (x-death reason maxlen), not
// rejected: no consumer refused it.
func TestSourceLengthLimitIsOverflow(t *testing.T) {
	t.Parallel()
	b := newBroker(t)
	dlq := b.failureQueue(nil)
	work := lengthLimited(b, dlq, 2)
	b.publish(work, numbered("job", 5, func(i int, p *amqp.Publishing) { p.MessageId = fmt.Sprint("m-", i) })...)
	b.waitDepth(dlq, 3)
	if d := b.depth(work); d != 2 {
		t.Fatalf("the work queue holds %d messages, want its limit of 2", d)
	}

	s := testSource(t, "overflow", dlq, nil)
	ds := receiveN(t, s, 3, 10)
	if got, want := bodies(ds), []string{"job-00000", "job-00001", "job-00002"}; !slices.Equal(got, want) {
		t.Fatalf("dead letters %v, want the three oldest %v", got, want)
	}
	for _, d := range ds {
		m := d.Message
		if m.FailureClass != quarantine.ClassOverflow || m.Queue != work || m.Reason != "maxlen from queue "+work+" (x-death count 1)" ||
			m.Headers["x-first-death-reason"] != "maxlen" || m.HasFlag(quarantine.FlagMalformed) {
			t.Errorf("%s: class %s queue %q reason %q headers %v flags %v", m.Payload, m.FailureClass, m.Queue, m.Reason, m.Headers, m.Flags)
		}
	}
	if err := s.Ack(context.Background(), ds); err != nil {
		t.Fatal(err)
	}
	b.waitDepth(dlq, 0)
}

func TestSourceAckNeverCoversUncommitted(t *testing.T) {
	t.Parallel()
	b := newBroker(t)
	dlq := b.failureQueue(nil)
	b.publish(dlq, numbered("m", 30, nil)...)
	s := testSource(t, "acks", dlq, func(c *Config) { c.Prefetch = 30 })
	a := receiveN(t, s, 10, 10)
	bb := receiveN(t, s, 10, 10)
	sess := s.sess

	// B is acknowledged before A: B's top tag with multiple would cover A.
	if err := s.Ack(context.Background(), bb); err != nil {
		t.Fatal(err)
	}
	if sess.multiAcks != 0 || sess.singleAcks != 10 {
		t.Fatalf("acks: %d multiple, %d single; want 0, 10", sess.multiAcks, sess.singleAcks)
	}
	// Acknowledging B again must not reach the broker (it would close the channel).
	if err := s.Ack(context.Background(), bb[:1]); quarantine.ErrorCode(err) != quarantine.EINTERNAL {
		t.Fatalf("double ack: %v", err)
	}
	// A and the 10 prefetched behind it return to the queue.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	b.waitDepth(dlq, 20)

	s2 := testSource(t, "acks", dlq, func(c *Config) { c.Prefetch = 30 })
	rest := receiveN(t, s2, 20, 20)
	if got, want := bodies(rest), bodies(append(a, numberedDeliveries("m", 20, 30)...)); !slices.Equal(got, want) {
		t.Fatalf("redelivered %v\nwant %v", got, want)
	}
	// One contiguous batch: one multiple ack.
	if err := s2.Ack(context.Background(), rest); err != nil {
		t.Fatal(err)
	}
	if s2.sess.multiAcks != 1 || s2.sess.singleAcks != 0 || len(s2.sess.outstanding) != 0 {
		t.Fatalf("acks: %d multiple, %d single, %d outstanding", s2.sess.multiAcks, s2.sess.singleAcks, len(s2.sess.outstanding))
	}
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	b.waitDepth(dlq, 0)
}

// numberedDeliveries fakes deliveries with numbered bodies from..to-1.
func numberedDeliveries(prefix string, from, to int) []collect.Delivery {
	var out []collect.Delivery
	for i := from; i < to; i++ {
		out = append(out, collect.Delivery{Message: &quarantine.Message{Payload: fmt.Appendf(nil, "%s-%05d", prefix, i)}})
	}
	return out
}

func TestSourceReceiveBounds(t *testing.T) {
	t.Parallel()
	b := newBroker(t)
	dlq := b.failureQueue(nil)
	b.publish(dlq, numbered("m", 3, nil)...)
	b.waitDepth(dlq, 3)
	s := testSource(t, "bounds", dlq, func(c *Config) { c.Prefetch = 10 })
	ctx := context.Background()

	ds, err := s.Receive(ctx, 2, time.Second)
	if err != nil || len(ds) != 2 {
		t.Fatalf("max 2: %d deliveries, %v", len(ds), err)
	}
	begin := time.Now()
	more, err := s.Receive(ctx, 10, 150*time.Millisecond)
	if err != nil || len(more) != 1 || time.Since(begin) < 150*time.Millisecond {
		t.Fatalf("linger: %d deliveries after %v, %v", len(more), time.Since(begin), err)
	}
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if none, err := s.Receive(cctx, 10, time.Second); len(none) != 0 || err == nil {
		t.Fatalf("empty queue: %d deliveries, %v", len(none), err)
	}
	if err := s.Ack(ctx, append(ds, more...)); err != nil {
		t.Fatal(err)
	}
	if err := s.Ack(ctx, []collect.Delivery{{Handle: "alien"}}); quarantine.ErrorCode(err) != quarantine.EINTERNAL {
		t.Fatalf("foreign delivery: %v", err)
	}
}

func TestSourceMissingQueue(t *testing.T) {
	t.Parallel()
	b := newBroker(t)
	name := b.name("missing")
	s := testSource(t, "missing", name, nil)
	_, err := s.Receive(context.Background(), 10, 0)
	if quarantine.ErrorCode(err) != quarantine.EUNAVAILABLE || quarantine.ErrorField(err) != "queue" ||
		!strings.Contains(quarantine.ErrorMessage(err), "does not exist") || !strings.Contains(quarantine.ErrorMessage(err), "declare: true") {
		t.Fatalf("missing queue: %v", err)
	}

	// declare: true creates it (durable, classic) and consumes.
	b.deleteAtCleanup(name)
	d := testSource(t, "declare", name, func(c *Config) { c.Declare = true })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() {
		// Publish once Receive declared the queue and consumes from it:
		// before, the message would be unroutable and dropped.
		if !b.waitConsumer(name) {
			t.Errorf("queue %s has no consumer after 30 s", name)
			return
		}
		b.publish(name, amqp.Publishing{Body: []byte("hello")})
	}()
	ds, err := d.Receive(ctx, 1, 0)
	if err != nil || len(ds) != 1 || string(ds[0].Message.Payload) != "hello" {
		t.Fatalf("declared queue: %v %v", ds, err)
	}
	if err := d.Ack(ctx, ds); err != nil {
		t.Fatal(err)
	}
}

func TestSourceStaleDeliveriesAreNotAcked(t *testing.T) {
	t.Parallel()
	b := newBroker(t)
	dlq := b.failureQueue(nil)
	b.publish(dlq, numbered("m", 5, nil)...)
	name := "stale-" + b.name("c")[3:]
	s := testSource(t, name, dlq, nil)
	ds := receiveN(t, s, 5, 5)
	old := s.sess
	if n := closeConnections(t, name); n != 1 {
		t.Fatalf("closed %d connections, want 1", n)
	}
	for deadline := time.Now().Add(10 * time.Second); !old.ch.IsClosed(); {
		if time.Now().After(deadline) {
			t.Fatal("the client did not see the broker close the connection")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := s.Ack(context.Background(), ds); quarantine.ErrorCode(err) != quarantine.EUNAVAILABLE {
		t.Fatalf("ack on a closed connection: %v", err)
	}
	again := receiveN(t, s, 5, 5) // dials anew
	if s.sess == old || !slices.Equal(bodies(again), bodies(ds)) {
		t.Fatalf("redelivered %v, want %v", bodies(again), bodies(ds))
	}
	if err := s.Ack(context.Background(), ds); quarantine.ErrorCode(err) != quarantine.EUNAVAILABLE {
		t.Fatalf("stale ack on a new connection: %v", err)
	}
	if err := s.Ack(context.Background(), again); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	b.waitDepth(dlq, 0)
}

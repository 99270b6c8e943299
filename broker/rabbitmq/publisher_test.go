package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/replay"
)

// outgoing returns n replay messages for queue, numbered from first, each
// with the replay headers, an idempotency key and a payload of size bytes
// (at least the number).
func outgoing(run, queue string, first, n, size int) []replay.Outgoing {
	out := make([]replay.Outgoing, n)
	for i := range out {
		k := first + i
		body := fmt.Appendf(nil, `{"run":%q,"n":%d,"pad":"`, run, k)
		for len(body) < size-2 {
			body = append(body, 'x')
		}
		body = append(body, `"}`...)
		key := fmt.Sprintf("order:%s:%d", run, k)
		out[i] = replay.Outgoing{
			Queue: queue, MessageID: fmt.Sprintf("rb-%s-%d", run, k), IdempotencyKey: key,
			JobName: "orders.charge", ContentType: "application/json", Payload: body,
			Headers: map[string]string{
				replay.HeaderReplayID:       "rb-" + run,
				replay.HeaderReplayedBy:     "alice",
				replay.HeaderOriginalID:     fmt.Sprintf("orig-%d", k),
				replay.HeaderIdempotencyKey: key,
				replay.HeaderJobName:        "orders.charge",
				"x-tenant":                  "acme",
			},
		}
	}
	return out
}

// testPublisher returns a Publisher named after the test, closed at cleanup.
func testPublisher(t testing.TB) *Publisher {
	t.Helper()
	p := NewPublisher(Config{URL: testURL()}, "pub-"+strings.ReplaceAll(t.Name(), "/", "-"), testLogger(t))
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// consume takes n messages off queue (auto-ack) and fails when fewer come.
func (b *testBroker) consume(queue string, n int) []amqp.Delivery {
	b.t.Helper()
	ch, err := b.conn.Channel()
	if err != nil {
		b.t.Fatal(err)
	}
	defer ch.Close()
	ds, err := ch.Consume(queue, "", true, false, false, false, nil)
	if err != nil {
		b.t.Fatal(err)
	}
	out := make([]amqp.Delivery, 0, n)
	timeout := time.After(30 * time.Second)
	for len(out) < n {
		select {
		case d := <-ds:
			out = append(out, d)
		case <-timeout:
			b.t.Fatalf("consumed %d of %d messages of %s", len(out), n, queue)
		}
	}
	return out
}

// outcomes counts the results by outcome.
func outcomes(res []replay.Result) map[quarantine.ItemOutcome]int {
	c := map[quarantine.ItemOutcome]int{}
	for _, r := range res {
		c[r.Outcome]++
	}
	return c
}

// checkDelivery compares a consumed message with what was published.
func checkDelivery(t *testing.T, d amqp.Delivery, o replay.Outgoing) {
	t.Helper()
	if string(d.Body) != string(o.Payload) {
		t.Errorf("%s: body %.60q, want %.60q", o.MessageID, d.Body, o.Payload)
	}
	if d.ContentType != o.ContentType || d.Type != o.JobName || d.DeliveryMode != amqp.Persistent {
		t.Errorf("%s: content type %q type %q delivery mode %d", o.MessageID, d.ContentType, d.Type, d.DeliveryMode)
	}
	for k, v := range o.Headers {
		if got, _ := d.Headers[k].(string); got != v {
			t.Errorf("%s: header %s = %#v, want %q", o.MessageID, k, d.Headers[k], v)
		}
	}
	if d.Headers[replay.HeaderIdempotencyKey] != o.IdempotencyKey || d.Headers[replay.HeaderReplayID] == nil {
		t.Errorf("%s: replay headers missing: %v", o.MessageID, d.Headers)
	}
}

func TestPublishConsumeBack(t *testing.T) {
	t.Parallel()
	b := newBroker(t)
	q := b.declare(b.name("replay"), nil)
	p := testPublisher(t)
	msgs := outgoing("back", q, 0, 1200, 300)

	res := p.Publish(context.Background(), msgs)
	if c := outcomes(res); c[quarantine.ItemPublished] != len(msgs) {
		t.Fatalf("outcomes %v, want %d published (first: %+v)", c, len(msgs), res[0])
	}
	byID := map[string]replay.Outgoing{}
	for _, m := range msgs {
		byID[m.MessageID] = m
	}
	b.waitDepth(q, len(msgs))
	for _, d := range b.consume(q, len(msgs)) {
		o, ok := byID[d.MessageId]
		if !ok {
			t.Fatalf("unexpected message id %q (or consumed twice)", d.MessageId)
		}
		delete(byID, d.MessageId)
		checkDelivery(t, d, o)
	}
	if len(byID) != 0 {
		t.Fatalf("%d messages not consumed", len(byID))
	}
}

func TestPublishUnroutableFailsAlone(t *testing.T) {
	t.Parallel()
	b := newBroker(t)
	q := b.declare(b.name("replay"), nil)
	missing := b.name("missing")
	p := testPublisher(t)
	msgs := outgoing("unroutable", q, 0, 60, 100)
	for i := 0; i < len(msgs); i += 3 {
		msgs[i].Queue = missing
	}

	res := p.Publish(context.Background(), msgs)
	want := 0
	for i, r := range res {
		if msgs[i].Queue == missing {
			if r.Outcome != quarantine.ItemFailed || quarantine.ErrorCode(r.Err) != quarantine.ENOTFOUND ||
				!strings.Contains(r.Err.Error(), "no queue named "+missing+": the message was unroutable") {
				t.Fatalf("message %d to the missing queue: %s %v", i, r.Outcome, r.Err)
			}
			continue
		}
		want++
		if r.Outcome != quarantine.ItemPublished {
			t.Fatalf("message %d: %s %v", i, r.Outcome, r.Err)
		}
	}
	b.waitDepth(q, want)
	for _, d := range b.consume(q, want) {
		var n int
		if _, err := fmt.Sscanf(d.MessageId, "rb-unroutable-%d", &n); err != nil || n%3 == 0 {
			t.Fatalf("unexpected message %s", d.MessageId)
		}
	}

	// The channel survives: the next slice is published. Fields AMQP
	// cannot carry fail their message alone, before anything is written.
	after := outgoing("after", q, 0, 5, 10)
	after[1].Queue = strings.Repeat("q", 256)
	after[3].Headers[strings.Repeat("h", 256)] = "v"
	res = p.Publish(context.Background(), after)
	for i, r := range res {
		if (i == 1 || i == 3) != (r.Outcome == quarantine.ItemFailed && quarantine.ErrorCode(r.Err) == quarantine.EINVALID) ||
			(i != 1 && i != 3 && r.Outcome != quarantine.ItemPublished) {
			t.Fatalf("after a return, message %d: %s %v", i, r.Outcome, r.Err)
		}
	}
}

// cutConn closes its connection once budget bytes have been written. Half
// way there it pauses once, so that the broker confirms what came before.
type cutConn struct {
	net.Conn
	budget *atomic.Int64
	paused *atomic.Bool
	half   int64
}

func (c cutConn) Write(b []byte) (int, error) {
	left := c.budget.Add(-int64(len(b)))
	if left < 0 {
		_ = c.Conn.Close()
		return 0, errors.New("test: connection cut")
	}
	if left < c.half && c.paused.CompareAndSwap(false, true) {
		time.Sleep(300 * time.Millisecond)
	}
	return c.Conn.Write(b)
}

func TestPublishConnectionLostMidStream(t *testing.T) {
	t.Parallel()
	b := newBroker(t)
	q := b.declare(b.name("replay"), nil)
	p := testPublisher(t)
	var dials atomic.Int32
	budget := &atomic.Int64{}
	budget.Store(300 << 10) // about 280 messages of 1 KiB after the handshake
	dial := p.dial
	p.dial = func(network, addr string) (net.Conn, error) {
		c, err := dial(network, addr)
		if err != nil || dials.Add(1) > 1 {
			return c, err
		}
		return cutConn{Conn: c, budget: budget, paused: &atomic.Bool{}, half: budget.Load() / 2}, nil
	}
	msgs := outgoing("cut", q, 0, 2000, 1024)

	res := p.Publish(context.Background(), msgs)
	c := outcomes(res)
	if c[quarantine.ItemPending] == 0 || c[quarantine.ItemPublished] == 0 || c[quarantine.ItemPublished]+c[quarantine.ItemPending] != len(msgs) {
		t.Fatalf("outcomes %v: want only published and pending, some of each", c)
	}
	var retry []replay.Outgoing
	for i, r := range res {
		if r.Outcome == quarantine.ItemPending {
			if quarantine.ErrorCode(r.Err) != quarantine.EUNAVAILABLE {
				t.Fatalf("pending %d: err %v, want EUNAVAILABLE", i, r.Err)
			}
			retry = append(retry, msgs[i])
		}
	}
	t.Logf("cut after %d published, %d pending", c[quarantine.ItemPublished], len(retry))

	// The next Publish dials again and publishes the rest.
	res = p.Publish(context.Background(), retry)
	if c := outcomes(res); c[quarantine.ItemPublished] != len(retry) {
		t.Fatalf("after the cut: %v (first %+v)", c, res[0])
	}
	if n := dials.Load(); n != 2 {
		t.Fatalf("%d dials, want 2", n)
	}
	// Every message is in the queue; one written but unconfirmed before
	// the cut may be there twice (its idempotency key absorbs that).
	depth := b.depth(q)
	for deadline := time.Now().Add(30 * time.Second); depth < len(msgs) && time.Now().Before(deadline); depth = b.depth(q) {
		time.Sleep(20 * time.Millisecond) // until every confirmed message is counted
	}
	if depth < len(msgs) || depth > len(msgs)+len(retry) {
		t.Fatalf("queue holds %d, want %d to %d", depth, len(msgs), len(msgs)+len(retry))
	}
	seen := map[string]bool{}
	for _, d := range b.consume(q, depth) {
		seen[d.MessageId] = true
	}
	for _, m := range msgs {
		if !seen[m.MessageID] {
			t.Fatalf("%s is not in the queue", m.MessageID)
		}
	}
}

func TestPublishAfterBrokerClosedConnection(t *testing.T) {
	t.Parallel()
	b := newBroker(t)
	q := b.declare(b.name("replay"), nil)
	p := testPublisher(t)
	if c := outcomes(p.Publish(context.Background(), outgoing("first", q, 0, 10, 10))); c[quarantine.ItemPublished] != 10 {
		t.Fatalf("first slice: %v", c)
	}
	out := rabbitmqctl(t, "list_connections", "-q", "--no-table-headers", "pid", "client_properties")
	want := fmt.Sprintf(`"quarantine publisher %s"`, p.name)
	closed := 0
	for _, line := range strings.Split(out, "\n") {
		pid, props, ok := strings.Cut(line, "\t")
		if ok && strings.Contains(props, want) {
			rabbitmqctl(t, "close_connection", strings.TrimSpace(pid), "test: broker-side close")
			closed++
		}
	}
	if closed != 1 {
		t.Fatalf("closed %d connections named %s", closed, want)
	}
	p.mu.Lock()
	conn := p.sess.conn
	p.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for !conn.IsClosed() {
		if time.Now().After(deadline) {
			t.Fatal("the client did not see the close")
		}
		time.Sleep(10 * time.Millisecond)
	}

	if c := outcomes(p.Publish(context.Background(), outgoing("second", q, 10, 10, 10))); c[quarantine.ItemPublished] != 10 {
		t.Fatalf("after the broker closed the connection: %v", c)
	}
	b.waitDepth(q, 20)
}

func TestPublishConcurrentCalls(t *testing.T) {
	t.Parallel()
	b := newBroker(t)
	q := b.declare(b.name("replay"), nil)
	missing := b.name("missing")
	p := testPublisher(t)
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 4 {
		wg.Go(func() {
			msgs := outgoing(fmt.Sprint("g", g), q, 0, 100, 50)
			msgs[g].Queue = missing
			for i, r := range p.Publish(context.Background(), msgs) {
				want := quarantine.ItemPublished
				if i == g {
					want = quarantine.ItemFailed
				}
				if r.Outcome != want {
					errs <- fmt.Sprintf("goroutine %d message %d: %s %v", g, i, r.Outcome, r.Err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	b.waitDepth(q, 4*99)
}

func TestPublishCancelledIsPending(t *testing.T) {
	t.Parallel()
	p := testPublisher(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, r := range p.Publish(ctx, outgoing("cancel", "any", 0, 3, 10)) {
		if r.Outcome != quarantine.ItemPending || r.Err == nil {
			t.Fatalf("cancelled: %s %v", r.Outcome, r.Err)
		}
	}
}

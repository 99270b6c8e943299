package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/quarantine-dev/quarantine/internal/testbin"
	"github.com/quarantine-dev/quarantine/internal/testenv"
)

// rabbit is the test's connection to the project's RabbitMQ node: it
// declares the test's queues (deleted when it ends), publishes and
// consumes.
type rabbit struct {
	t    *testing.T
	URL  string
	conn *amqp.Connection
	ch   *amqp.Channel
}

func newRabbit(t *testing.T) *rabbit {
	t.Helper()
	u := testenv.Require(t, testenv.AMQPURL, "RabbitMQ")
	conn, err := amqp.DialConfig(u, amqp.Config{Dial: amqp.DefaultDial(5 * time.Second)})
	if err != nil {
		testenv.Unavailable(t, testenv.AMQPURL, "RabbitMQ does not answer: "+err.Error())
	}
	t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	return &rabbit{t: t, URL: u, conn: conn, ch: ch}
}

// queue declares a durable queue prefix-<random>, deleted at the end.
func (r *rabbit) queue(prefix string) string {
	r.t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := prefix + "-" + hex.EncodeToString(b)
	if _, err := r.ch.QueueDeclare(name, true, false, false, false, nil); err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() {
		if ch, err := r.conn.Channel(); err == nil {
			_, _ = ch.QueueDelete(name, false, false, false)
			ch.Close()
		}
	})
	return name
}

// publish sends bodies to queue, each with its message id, and waits for
// the broker's confirmations.
func (r *rabbit) publish(queue string, ids []string, bodies [][]byte) {
	r.t.Helper()
	ctx := context.Background()
	for i, body := range bodies {
		c, err := r.ch.PublishWithDeferredConfirmWithContext(ctx, "", queue, true, false,
			amqp.Publishing{ContentType: "application/json", MessageId: ids[i], DeliveryMode: amqp.Persistent, Body: body})
		if err != nil {
			r.t.Fatal(err)
		}
		if ok, err := c.WaitContext(ctx); !ok || err != nil {
			r.t.Fatalf("publish to %s not confirmed: %v", queue, err)
		}
	}
}

// depth is the number of ready messages of queue.
func (r *rabbit) depth(queue string) int {
	r.t.Helper()
	q, err := r.ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	return q.Messages
}

// arrival is one message the work queue's consumer got.
type arrival struct {
	key string // x-idempotency-key
	at  time.Time
}

// consumer takes every message of a queue, stamping its arrival, and
// measures how late this process's own goroutines run (a loaded 2-core
// machine may leave it unscheduled and then hand it a bunch at once).
type consumer struct {
	mu     sync.Mutex
	got    []arrival
	stalls *testbin.Stalls
}

func (r *rabbit) consume(queue string) *consumer {
	r.t.Helper()
	ch, err := r.conn.Channel()
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { ch.Close() })
	ds, err := ch.Consume(queue, "", true, false, false, false, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	c := &consumer{stalls: testbin.MeasureStalls(r.t, 2*time.Millisecond)}
	go func() {
		for d := range ds {
			key, _ := d.Headers["x-idempotency-key"].(string)
			c.mu.Lock()
			c.got = append(c.got, arrival{key, time.Now()})
			c.mu.Unlock()
		}
	}()
	return c
}

// arrivals returns what arrived so far and the longest stall measured.
func (c *consumer) arrivals() ([]arrival, time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]arrival(nil), c.got...), c.stalls.Longest()
}

// keys counts the arrivals by idempotency key.
func keys(as []arrival) map[string]int {
	out := map[string]int{}
	for _, a := range as {
		out[a.key]++
	}
	return out
}

// peak is the most arrivals within any window of length w.
func peak(as []arrival, w time.Duration) int {
	at := make([]time.Time, len(as))
	for i, a := range as {
		at[i] = a.at
	}
	return testbin.MaxInWindow(at, w)
}

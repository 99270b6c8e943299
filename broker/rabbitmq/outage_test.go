package rabbitmq

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/quarantine-dev/quarantine/collect"
	"github.com/quarantine-dev/quarantine/internal/pgtest"
	"github.com/quarantine-dev/quarantine/store/postgres"
)

// pgExec runs one statement on the test's schema.
func pgExec(t *testing.T, url, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// A store outage on a quorum failure queue with x-delivery-limit: the
// collector holds its batch, acknowledges nothing and never requeues, so
// the broker counts no redelivery and drops nothing; the drain resumes when
// the store returns.
func TestStoreOutageOnQuorumQueueDropsNothing(t *testing.T) {
	t.Parallel()
	const n = 600
	url := pgtest.URL(t)
	ctx := context.Background()
	st, err := postgres.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	b := newBroker(t)
	// No dead-letter exchange on the failure queue: a message over the
	// limit would be gone for good.
	dlq := b.failureQueue(amqp.Table{"x-queue-type": "quorum", "x-delivery-limit": int32(1)})
	published := numbered("outage", n, nil)
	b.publish(dlq, published...)
	b.waitDepth(dlq, n)

	pgExec(t, url, "ALTER TABLE messages RENAME TO messages_outage") // the store fails every insert
	src := testSource(t, "outage", dlq, nil)
	c, stop := runCollector(t, "outage", src, st, 100)
	for deadline := time.Now().Add(30 * time.Second); c.Stats().Errors[collect.ErrStore] < 8; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the store did not fail: %+v", c.Stats())
		}
	}
	// Up to collect.DefaultCommits batches (up to 100 each; fewer when the
	// linger ends one) are being retried; the next one may be held,
	// received but not yet handed over.
	if s := c.Stats(); s.Stored != 0 || s.Received == 0 || s.Received > collect.DefaultCommits*100 {
		t.Fatalf("during the outage: %+v (want nothing stored, at most %d batches retried)", s, collect.DefaultCommits)
	}
	pgExec(t, url, "ALTER TABLE messages_outage RENAME TO messages")
	waitStored(t, c, n, 60*time.Second)
	stop()
	b.waitDepth(dlq, 0)
	for _, m := range exactlyOnce(t, st, "outage", bodiesOf(published)) {
		if v, ok := m.Headers["x-delivery-count"]; ok && v != "0" {
			t.Fatalf("message %s was redelivered (x-delivery-count %s): something requeued it", m.ID, v)
		}
	}
	t.Logf("store errors during the outage: %d", c.Stats().Errors[collect.ErrStore])
}

package rabbitmq

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/replay"
)

// The broker goes down in the middle of a replay (a private node,
// stop_app then start_app): publishing pauses, no item fails, and once it
// is back the batch completes with every message on the queue.
func TestReplaySurvivesBrokerOutage(t *testing.T) {
	t.Parallel()
	node := startPrivateNode(t)
	b := newBrokerAt(t, node.url)
	work := b.declare(b.name("work"), nil)
	const n = 300
	st := testStore(t)
	ctx := context.Background()
	msgs := make([]*quarantine.Message, n)
	ids := make([]string, n)
	for i := range msgs {
		msgs[i] = &quarantine.Message{Source: "orders", SourceKind: quarantine.SourceRabbitMQ, Queue: work, JobName: "charge",
			IdempotencyKey: fmt.Sprintf("order-%d", i), Payload: fmt.Appendf(nil, `{"n":%d}`, i), DedupeKey: fmt.Sprint(i)}
	}
	res, err := st.InsertBatch(ctx, msgs)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		ids[i] = r.ID
	}
	pub := NewPublisher(Config{URL: node.url}, "orders", testLogger(t))
	t.Cleanup(func() { _ = pub.Close() })
	reg := prometheus.NewRegistry()
	eng := replay.New(replay.Config{Store: st, Poll: 50 * time.Millisecond, Logger: testLogger(t), Metrics: replay.NewMetrics(reg),
		Router: &replay.Routes{Brokers: map[string]replay.Broker{"orders": {Name: "orders", Kind: "rabbitmq", Publisher: pub}}}})
	ectx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = eng.Run(ectx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })

	r := quarantine.ReplayRequest{IDs: ids, Rate: 30, Burst: 5, Reason: "outage test", Actor: "token:t"}
	if err := r.Validate(0); err != nil {
		t.Fatal(err)
	}
	batch, err := st.CreateReplay(ctx, r, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitItems := func(what string, ok func(*quarantine.ReplayBatch) bool) *quarantine.ReplayBatch {
		t.Helper()
		for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			got, err := st.GetReplay(ctx, batch.ID)
			if err != nil {
				t.Fatal(err)
			}
			if ok(got) {
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the batch is %s %v", what, got.State, got.Counts)
			}
		}
	}
	waitItems("some published", func(b *quarantine.ReplayBatch) bool { return b.Counts[quarantine.ItemPublished] >= 30 })
	node.mustCtl("stop_app")
	down := waitItems("down", func(*quarantine.ReplayBatch) bool { return true })
	if down.Counts[quarantine.ItemPending] == 0 {
		t.Fatalf("the batch was done before the broker went down (%v): nothing was tested", down.Counts)
	}
	// Wait until the engine tried while the node was down (a chunk went
	// back: outcome "retry"), then tried again after its backoff.
	waitRetries := func(above float64) float64 {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if r := retries(t, reg); r > above {
				return r
			}
			if time.Now().After(deadline) {
				t.Fatalf("the engine did not try again while the broker was down (%v retries)", retries(t, reg))
			}
		}
	}
	waitRetries(waitRetries(0))
	during := waitItems("down", func(*quarantine.ReplayBatch) bool { return true })
	if during.Counts[quarantine.ItemFailed] != 0 || during.State != quarantine.ReplayRunning {
		t.Fatalf("during the outage: %s %v (items must wait, not fail)", during.State, during.Counts)
	}
	if during.Counts[quarantine.ItemPublished] > down.Counts[quarantine.ItemPublished]+20 {
		t.Fatalf("published %d → %d while the broker was down", down.Counts[quarantine.ItemPublished], during.Counts[quarantine.ItemPublished])
	}
	node.mustCtl("start_app")
	node.awaitStartup()
	done := waitItems("completed", func(b *quarantine.ReplayBatch) bool { return b.State == quarantine.ReplayCompleted })
	if done.Counts[quarantine.ItemPublished] != n || done.Counts[quarantine.ItemFailed] != 0 {
		t.Fatalf("after the outage: %v", done.Counts)
	}
	// Every message is on the queue (the node keeps durable queues and
	// persistent messages across stop_app), repeats at most a chunk.
	b = newBrokerAt(t, node.url)
	got := b.consumeN(work, n, 30*time.Second, 300*time.Millisecond)
	keys := map[string]bool{}
	for _, m := range got {
		k, _ := m.headers["x-idempotency-key"].(string)
		keys[k] = true
	}
	if len(keys) != n {
		t.Fatalf("%d distinct keys on the queue after the outage, want %d (%d deliveries)", len(keys), n, len(got))
	}
	t.Logf("%d deliveries of %d messages across the outage", len(got), n)
}

// retries reads the engine's count of items given back (not taken now).
func retries(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "quarantine_replay_published_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == "retry" {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}

package pubsub

import (
	"context"
	"testing"
	"time"

	ps "cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/grpc/codes"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/replay"
)

// TestReplayRoundTrip collects a forwarded dead letter, replays it
// through the Publisher as the engine prepares it, and reads it back from
// the source topic: same data, ordering key and application attributes;
// no dead-letter bookkeeping; the replay headers.
func TestReplayRoundTrip(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.topic("orders")
	s.topic("orders.dlq")
	s.subscription("orders-worker", "orders", "", 0)
	s.subscription("orders.dlq-q", "orders.dlq", "", 0)
	orig := &ps.Message{Data: []byte(`{"order":7}`), OrderingKey: "customer-9",
		Attributes: map[string]string{"x-idempotency-key": "order:7", "traceparent": "00-abc-def-01"}}
	s.publish("orders.dlq", forwarded(orig, "orders-worker", "5", time.Now()))
	st := openStore(t)
	r := runCollector(t, "ps-rt", s.config("orders.dlq-q"), st, 10)
	eventually(t, 10*time.Second, "the dead letter stored", func() bool { return len(allMessages(t, st, "ps-rt")) == 1 })
	r.Stop()
	m, err := st.GetMessage(context.Background(), allMessages(t, st, "ps-rt")[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := NewPublisher(s.config("orders.dlq-q"), "ps-rt", quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	b := &quarantine.ReplayBatch{ID: "b-1", Actor: "alice"}
	out, _ := replay.Prepare(b, quarantine.ReplayLease{Message: m}, m.Queue)
	res := pub.Publish(context.Background(), []replay.Outgoing{out})
	if res[0].Outcome != quarantine.ItemPublished {
		t.Fatalf("publish: %+v", res[0])
	}
	got := s.pull("orders-worker", 1)[0]
	if string(got.Data) != `{"order":7}` || got.OrderingKey != "customer-9" {
		t.Fatalf("replayed data %q ordering key %q", got.Data, got.OrderingKey)
	}
	a := got.Attributes
	if a["x-idempotency-key"] != "order:7" || a["traceparent"] != "00-abc-def-01" || a[replay.HeaderReplayID] != "b-1" ||
		a[replay.HeaderOriginalID] != m.ID || a[HeaderContentType] != "application/json" {
		t.Fatalf("replayed attributes %v", a)
	}
	for k := range a {
		if Bookkeeping(k) {
			t.Errorf("bookkeeping attribute %s replayed", k)
		}
	}
}

// A topic that does not exist or a name that cannot be one fails the
// item; the service refusing for now (resource exhausted) is pending and
// refused; an unreachable service is pending, not refused.
func TestPublishOutcomes(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.topic("orders")
	pub, err := NewPublisher(s.config("x-sub"), "ps-out", quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	ctx := context.Background()
	res := pub.Publish(ctx, []replay.Outgoing{{Queue: "missing", Payload: []byte("a")}, {Queue: "a b", Payload: []byte("b")},
		{Queue: "orders", Payload: []byte("c")}})
	if res[0].Outcome != quarantine.ItemFailed || quarantine.ErrorCode(res[0].Err) != quarantine.ENOTFOUND {
		t.Errorf("missing topic: %+v", res[0])
	}
	if res[1].Outcome != quarantine.ItemFailed || quarantine.ErrorCode(res[1].Err) != quarantine.EINVALID {
		t.Errorf("bad name: %+v", res[1])
	}
	if res[2].Outcome != quarantine.ItemPublished {
		t.Errorf("orders: %+v", res[2])
	}

	busy := newServer(t, pstest.WithErrorInjection("Publish", codes.ResourceExhausted, "quota exceeded"))
	bp, err := NewPublisher(busy.config("x-sub"), "ps-busy", quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer bp.Close()
	bp.timeout = 2 * time.Second
	cctx, cancel := context.WithTimeout(ctx, 5*patience*time.Second)
	defer cancel()
	if r := bp.Publish(cctx, []replay.Outgoing{{Queue: "orders", Payload: []byte("x")}})[0]; r.Outcome != quarantine.ItemPending || !r.Refused {
		t.Errorf("resource exhausted: %+v", r)
	}

	gone, err := NewPublisher(Config{Project: project, Subscription: "x-sub", Endpoint: "127.0.0.1:1"}, "ps-gone", quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer gone.Close()
	gone.timeout = 2 * time.Second
	dctx, cancel2 := context.WithTimeout(ctx, 2*time.Second)
	defer cancel2()
	if r := gone.Publish(dctx, []replay.Outgoing{{Queue: "orders", Payload: []byte("x")}})[0]; r.Outcome != quarantine.ItemPending || r.Refused {
		t.Errorf("unreachable: %+v", r)
	}
}

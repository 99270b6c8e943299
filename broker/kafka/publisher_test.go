package kafka

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/replay"
)

// consume reads n records of topic from the start.
func (k *cluster) consume(topic string, n int) []*kgo.Record {
	k.tb.Helper()
	cl := k.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*patience*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			k.tb.Fatalf("%d of %d records read from %s: %v", len(out), n, topic, err)
		}
		out = append(out, fs.Records()...)
	}
	return out
}

func header(r *kgo.Record, name string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == name {
			return string(h.Value), true
		}
	}
	return "", false
}

// TestReplayRoundTrip collects a Spring dead letter, replays it through
// the Publisher as the engine prepares it, and reads it back from the
// original topic: same key (so the same partition), value and job
// headers; no dead-letter bookkeeping; the replay headers.
func TestReplayRoundTrip(t *testing.T) {
	t.Parallel()
	k := newCluster(t, 3, "orders", "orders.DLT")
	st := openStore(t)
	dl := springRecord("orders.DLT", "orders", 1, 7, []byte("customer-9"), []byte(`{"order":7}`), time.Now(),
		"java.lang.RuntimeException", "stock service answered 500")
	dl.Headers = append(dl.Headers, kgo.RecordHeader{Key: "x-idempotency-key", Value: []byte("order:7")},
		kgo.RecordHeader{Key: "traceparent", Value: []byte("00-abc-def-01")})
	k.produce(dl)
	r := runCollector(t, "kafka-dlq", k.config("quarantine", "orders.DLT"), st, 10)
	eventually(t, 10*time.Second, "the dead letter stored", func() bool { return len(allMessages(t, st, "kafka-dlq")) == 1 })
	r.Stop()
	m, err := st.GetMessage(context.Background(), allMessages(t, st, "kafka-dlq")[0].ID)
	if err != nil {
		t.Fatal(err)
	}

	pub, err := NewPublisher(k.config("quarantine", "orders.DLT"), "kafka-dlq", quietLogger())
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
	got := k.consume("orders", 1)[0]
	if string(got.Key) != "customer-9" || string(got.Value) != `{"order":7}` {
		t.Fatalf("replayed key %q value %q", got.Key, got.Value)
	}
	// The same key lands on the partition a record keyed alike goes to.
	k.produce(&kgo.Record{Topic: "orders", Key: []byte("customer-9"), Value: []byte("probe")})
	probe := k.consume("orders", 2)
	if probe[len(probe)-1].Partition != got.Partition && probe[0].Partition != got.Partition {
		t.Errorf("replayed on partition %d, a record with the same key on %d", got.Partition, probe[1].Partition)
	}
	for _, h := range got.Headers {
		if Bookkeeping(h.Key) {
			t.Errorf("bookkeeping header %s replayed", h.Key)
		}
	}
	for name, want := range map[string]string{
		"x-idempotency-key": "order:7", "traceparent": "00-abc-def-01",
		replay.HeaderReplayID: "b-1", replay.HeaderReplayedBy: "alice", replay.HeaderOriginalID: m.ID,
		"contentType": "application/json",
	} {
		if v, ok := header(got, name); !ok || v != want {
			t.Errorf("header %s = %q, %v; want %q", name, v, ok, want)
		}
	}
}

// TestPublishFailures: a topic that does not exist and a record too large
// fail the item; an invalid topic name fails it without a produce.
func TestPublishFailures(t *testing.T) {
	t.Parallel()
	k := newCluster(t, 1, "orders")
	pub, err := NewPublisher(k.config("quarantine", "orders.DLT"), "kafka-dlq", quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	res := pub.Publish(context.Background(), []replay.Outgoing{
		{Queue: "no-such-topic", Payload: []byte("x")},
		{Queue: "orders", Payload: []byte(strings.Repeat("x", 2<<20))},
		{Queue: "bad topic", Payload: []byte("x")},
		{Queue: "orders", Payload: []byte("fine")},
	})
	want := []struct {
		outcome quarantine.ItemOutcome
		code    string
	}{
		{quarantine.ItemFailed, quarantine.ENOTFOUND},
		{quarantine.ItemFailed, quarantine.EINVALID},
		{quarantine.ItemFailed, quarantine.EINVALID},
		{quarantine.ItemPublished, ""},
	}
	for i, w := range want {
		var qe *quarantine.Error
		code := ""
		if errors.As(res[i].Err, &qe) {
			code = qe.Code
		}
		if res[i].Outcome != w.outcome || code != w.code {
			t.Errorf("message %d: %v %q (%v), want %v %q", i, res[i].Outcome, code, res[i].Err, w.outcome, w.code)
		}
	}
}

// TestPublishUnreachableIsPending: a cluster that cannot be reached
// leaves the item pending, not refused (no attempt spent).
func TestPublishUnreachableIsPending(t *testing.T) {
	t.Parallel()
	pub, err := NewPublisher(Config{Brokers: []string{"127.0.0.1:1"}, Topics: []string{"a.dlq"}}, "x", quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	res := pub.Publish(ctx, []replay.Outgoing{{Queue: "orders", Payload: []byte("x")}})
	if res[0].Outcome != quarantine.ItemPending || res[0].Refused {
		t.Fatalf("unreachable: %+v", res[0])
	}
}

// TestPublishNotEnoughReplicasIsRefused: a broker that keeps answering
// NOT_ENOUGH_REPLICAS (retriable) leaves the item pending and Refused, so
// that the engine offers it a bounded number of times.
func TestPublishNotEnoughReplicasIsRefused(t *testing.T) {
	t.Parallel()
	k := newCluster(t, 1, "orders")
	k.c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		k.c.KeepControl()
		pr := req.(*kmsg.ProduceRequest)
		resp := pr.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range pr.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.NotEnoughReplicas.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	pub, err := NewPublisher(k.config("quarantine", "orders.DLT"), "kafka-dlq", quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	pub.timeout = 2 * time.Second
	defer pub.Close()
	res := pub.Publish(context.Background(), []replay.Outgoing{{Queue: "orders", Payload: []byte("x")}})
	if res[0].Outcome != quarantine.ItemPending || !res[0].Refused {
		t.Fatalf("not enough replicas: %+v (%v)", res[0], res[0].Err)
	}
}

package replay_test

import (
	"reflect"
	"sync"
	"testing"

	"github.com/quarantine-dev/quarantine"
	// As in the binary, which imports every broker: Kafka's dead-letter
	// headers and Pub/Sub's dead-letter attributes (registered by the
	// packages) are dropped from every replay
	// (TestPrepareDropsEveryBrokersDeadLetterBookkeeping;
	// TestReplayPublishesThePinnedSet checks Kafka's on the memory broker).
	_ "github.com/quarantine-dev/quarantine/broker/kafka"
	_ "github.com/quarantine-dev/quarantine/broker/pubsub"
	"github.com/quarantine-dev/quarantine/replay"
)

// prepared is what Prepare publishes for a message with headers h.
func prepared(h map[string]string) (map[string]string, []string) {
	b := &quarantine.ReplayBatch{ID: "rb-1", Actor: "alice"}
	m := &quarantine.Message{ID: "m-1", IdempotencyKey: "order:7", JobName: "charge", Headers: h}
	out, dropped := replay.Prepare(b, quarantine.ReplayLease{Message: m}, "orders")
	return out.Headers, dropped
}

// A replay copies the original headers less the brokers' bookkeeping
// (names and prefixes, any case) and the redacted ones (listed), and sets
// the replay headers afresh.
func TestPrepareDropsBookkeepingAndRedacted(t *testing.T) {
	t.Parallel()
	h, dropped := prepared(map[string]string{
		"traceparent": "00-abc", "X-Death": "[...]", "x-first-death-queue": "orders", "nats-expected-stream": "S",
		"x-quarantine-replay-id": "rb-0", "x-delivery-count": "3", "authorization": replay.RedactedValue,
		"cookie": replay.RedactedValue, "x-deathly": "kept: x-death is a name, not a prefix",
	})
	want := map[string]string{
		"traceparent": "00-abc", "x-deathly": "kept: x-death is a name, not a prefix",
		replay.HeaderIdempotencyKey: "order:7", replay.HeaderJobName: "charge",
		replay.HeaderReplayID: "rb-1", replay.HeaderReplayedBy: "alice", replay.HeaderOriginalID: "m-1",
	}
	if !reflect.DeepEqual(h, want) {
		t.Errorf("headers %v, want %v", h, want)
	}
	if !reflect.DeepEqual(dropped, []string{"authorization", "cookie"}) {
		t.Errorf("dropped %v", dropped)
	}
}

// The message's own idempotency header is kept as it is, under its own
// name; none is added beside it.
func TestPrepareKeepsTheOriginalKeyHeader(t *testing.T) {
	t.Parallel()
	h, _ := prepared(map[string]string{"X-Idempotency-Key": "order:7"})
	if h["X-Idempotency-Key"] != "order:7" {
		t.Errorf("headers %v", h)
	}
	if _, ok := h[replay.HeaderIdempotencyKey]; ok {
		t.Errorf("a second key header: %v", h)
	}
}

// Names a broker package registers are dropped from every replay,
// matched without regard to case, a name ending in "-" or "." as a
// prefix; registering concurrently loses none.
func TestRegisterBookkeeping(t *testing.T) {
	t.Parallel()
	h := map[string]string{"X-Test-Outgoing-A-1": "1", "x-test-outgoing.b.c": "2", "x-test-outgoing-exact": "3",
		"x-test-outgoing-exactly": "4", "x-test-outgoing-kept": "5"}
	before, _ := prepared(h)
	for k := range h {
		if _, ok := before[k]; !ok {
			t.Fatalf("%s dropped before it was registered", k)
		}
	}
	var wg sync.WaitGroup
	for _, n := range []string{"x-test-outgoing-a-", "X-TEST-OUTGOING.", "x-test-outgoing-exact"} {
		wg.Go(func() { replay.RegisterBookkeeping(n) })
	}
	wg.Wait()
	after, _ := prepared(h)
	for k, v := range map[string]bool{"X-Test-Outgoing-A-1": false, "x-test-outgoing.b.c": false, "x-test-outgoing-exact": false,
		"x-test-outgoing-exactly": true, "x-test-outgoing-kept": true} {
		if _, ok := after[k]; ok != v {
			t.Errorf("%s replayed: %v, want %v (headers %v)", k, ok, v, after)
		}
	}
}

// The dead-letter bookkeeping the broker packages register (Kafka
// Connect's, Spring's and Streams' headers, Pub/Sub's
// CloudPubSubDeadLetterSource* attributes) is dropped from a replay to any
// broker, in any case; the job's own headers are kept.
func TestPrepareDropsEveryBrokersDeadLetterBookkeeping(t *testing.T) {
	t.Parallel()
	h, dropped := prepared(map[string]string{
		"__connect.errors.topic": "orders", "kafka_dlt-original-offset": "7", "__streams.errors.exception": "E",
		"CloudPubSubDeadLetterSourceSubscription": "orders-sub", "CloudPubSubDeadLetterSourceSubscriptionProject": "p",
		"CloudPubSubDeadLetterSourceTopicPublishTime": "2026-01-02T03:04:05Z", "cloudpubsubdeadlettersourcedeliverycount": "5",
		"CloudPubSubDeadLetterSourceDeliveryErrorMessage": "500", "tenant": "acme",
	})
	want := map[string]string{
		"tenant":                    "acme",
		replay.HeaderIdempotencyKey: "order:7", replay.HeaderJobName: "charge",
		replay.HeaderReplayID: "rb-1", replay.HeaderReplayedBy: "alice", replay.HeaderOriginalID: "m-1",
	}
	if !reflect.DeepEqual(h, want) {
		t.Errorf("headers %v, want %v", h, want)
	}
	if len(dropped) != 0 {
		t.Errorf("dropped %v: bookkeeping is not a redaction", dropped)
	}
}

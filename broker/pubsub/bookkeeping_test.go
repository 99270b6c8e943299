package pubsub

import (
	"testing"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/replay"
)

// The replay engine drops the attributes a dead-letter policy adds
// (CloudPubSubDeadLetterSource*, any case) from a Pub/Sub dead letter
// whatever broker the replay goes to, and keeps the job's attributes and
// the collector's x-pubsub-* headers, from which the Pub/Sub publisher
// takes the ordering key.
func TestReplayDropsPubSubDeadLetterAttributesForEveryBroker(t *testing.T) {
	t.Parallel()
	m := &quarantine.Message{ID: "m-1", Headers: map[string]string{
		AttrSourceSubscription: "orders-sub", AttrSourceProject: "my-project", AttrSourcePublishTime: "2026-01-02T03:04:05Z",
		"cloudpubsubdeadlettersourcedeliverycount": "5", AttrSourceError: "push endpoint answered 500",
		"traceparent": "00-abc", "tenant": "acme",
		HeaderOrderingKey: "customer-9", HeaderMessageID: "123", HeaderSourceTopic: "orders",
	}}
	out, _ := replay.Prepare(&quarantine.ReplayBatch{ID: "b-1", Actor: "alice"}, quarantine.ReplayLease{Message: m}, "orders")
	for _, gone := range []string{AttrSourceSubscription, AttrSourceProject, AttrSourcePublishTime, "cloudpubsubdeadlettersourcedeliverycount", AttrSourceError} {
		if _, ok := out.Headers[gone]; ok {
			t.Errorf("%s replayed", gone)
		}
	}
	for _, kept := range []string{"traceparent", "tenant", HeaderOrderingKey, HeaderMessageID, HeaderSourceTopic} {
		if out.Headers[kept] != m.Headers[kept] {
			t.Errorf("%s = %q, want %q", kept, out.Headers[kept], m.Headers[kept])
		}
	}
	// Every attribute a dead-letter policy adds is registered.
	for _, a := range deadLetterAttributes {
		if !Bookkeeping(a) {
			t.Errorf("%s registered but not bookkeeping for the publisher", a)
		}
	}
}

package kafka

import (
	"testing"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/replay"
)

// The replay engine drops the dead-letter headers of Connect, Spring and
// Streams (any case) from a Kafka dead letter whatever broker the replay
// goes to, and keeps the collector's x-kafka-* headers, from which the
// Kafka publisher takes the record key.
func TestReplayDropsKafkaDeadLetterHeadersForEveryBroker(t *testing.T) {
	t.Parallel()
	m := &quarantine.Message{ID: "m-1", Headers: map[string]string{
		connectTopic: "orders", connectStacktrace: "at ...", springTopic: "orders", "KAFKA_DLT-exception-fqcn": "E",
		springAttempts: "3", streamsException: "E: boom", "traceparent": "00-abc",
		HeaderKey: "customer-9", HeaderTopic: "orders.DLT", HeaderOffset: "7",
	}}
	out, _ := replay.Prepare(&quarantine.ReplayBatch{ID: "b-1", Actor: "alice"}, quarantine.ReplayLease{Message: m}, "orders")
	for _, gone := range []string{connectTopic, connectStacktrace, springTopic, "KAFKA_DLT-exception-fqcn", springAttempts, streamsException} {
		if _, ok := out.Headers[gone]; ok {
			t.Errorf("%s replayed", gone)
		}
	}
	for _, kept := range []string{"traceparent", HeaderKey, HeaderTopic, HeaderOffset} {
		if out.Headers[kept] != m.Headers[kept] {
			t.Errorf("%s = %q, want %q", kept, out.Headers[kept], m.Headers[kept])
		}
	}
}

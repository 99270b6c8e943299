package kafka

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/quarantine-dev/quarantine"
)

func decodeOne(r *kgo.Record) *quarantine.Message {
	if r.Topic == "" {
		r.Topic = "dlq"
	}
	return decoder{source: "c"}.decode(r)
}

func drop(r *kgo.Record, name string) *kgo.Record {
	var hs []kgo.RecordHeader
	for _, h := range r.Headers {
		if h.Key != name {
			hs = append(hs, h)
		}
	}
	r.Headers = hs
	return r
}

func set(r *kgo.Record, name, value string) *kgo.Record {
	r.Headers = append(drop(r, name).Headers, kgo.RecordHeader{Key: name, Value: []byte(value)})
	return r
}

// Each format's problems are flagged and said; what could be read is kept.
func TestDecodeFormats(t *testing.T) {
	t.Parallel()
	ts := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		rec       *kgo.Record
		queue     string
		class     quarantine.FailureClass
		malformed bool
		reason    string // a part of the reason
		id        string
	}{
		{"connect converter", connectRecord("dlq", "orders", 1, 5, nil, []byte("x"), ts, "VALUE_CONVERTER", "E", "bad"),
			"orders", quarantine.ClassMalformed, false, "Kafka Connect: E: bad (connector orders-sink, task 0, stage VALUE_CONVERTER", "orders/1/5"},
		{"connect task put", connectRecord("dlq", "orders", 1, 5, nil, []byte("x"), ts, "TASK_PUT", "java.io.IOException", "disk full"),
			"orders", quarantine.ClassPermanent, false, "java.io.IOException: disk full", "orders/1/5"},
		{"connect offset not a number", set(connectRecord("dlq", "orders", 1, 5, nil, nil, ts, "TASK_PUT", "E", "m"), "__connect.errors.offset", "five"),
			"orders", quarantine.ClassPermanent, true, `__connect.errors.offset must be an integer, got "five"`, "dlq/0/0"},
		{"connect without topic", drop(connectRecord("dlq", "orders", 1, 5, nil, nil, ts, "TASK_PUT", "E", "m"), "__connect.errors.topic"),
			"", quarantine.ClassPermanent, true, "__connect.errors.topic is missing", "dlq/0/0"},
		{"spring deserialization", springRecord("dlq", "orders", 0, 9, nil, []byte("x"), ts,
			"org.springframework.kafka.support.serializer.DeserializationException", "failed to deserialize"),
			"orders", quarantine.ClassMalformed, false, "Spring Kafka: org.springframework.kafka.support.serializer.DeserializationException: failed to deserialize", "orders/0/9"},
		{"spring partition of 3 bytes", set(springRecord("dlq", "orders", 0, 9, nil, nil, ts, "E", "m"), "kafka_dlt-original-partition", "abc"),
			"orders", quarantine.ClassExhausted, true, "kafka_dlt-original-partition must be a 4- or 8-byte big-endian integer, got 3 bytes", "dlq/0/0"},
		{"spring key exception", drop(drop(set(springRecord("dlq", "orders", 0, 9, nil, nil, ts, "", ""), "kafka_dlt-key-exception-message", "bad key"),
			"kafka_dlt-exception-fqcn"), "kafka_dlt-exception-message"),
			"orders", quarantine.ClassExhausted, false, "Spring Kafka: bad key", "orders/0/9"},
		{"streams null message", drop(streamsRecord("dlq", "clicks", 2, 3, nil, nil, ts, "E", ""), "__streams.errors.exception"),
			"clicks", quarantine.ClassPermanent, false, "Kafka Streams: the dead letter gives no exception", "clicks/2/3"},
		{"streams serialization", streamsRecord("dlq", "clicks", 2, 3, nil, nil, ts, "org.apache.kafka.common.errors.SerializationException", "x"),
			"clicks", quarantine.ClassMalformed, false, "SerializationException: x", "clicks/2/3"},
		{"raw", &kgo.Record{Value: []byte("hello")}, "", quarantine.ClassUnknown, true, "stored raw", "dlq/0/0"},
		{"broken envelope", &kgo.Record{Value: []byte(`{"envelope":"quarantine.failure/v1",`)}, "", quarantine.ClassMalformed, true, "invalid JSON", "dlq/0/0"},
	} {
		m := decodeOne(tc.rec)
		if m.Queue != tc.queue || m.FailureClass != tc.class || m.HasFlag(quarantine.FlagMalformed) != tc.malformed ||
			!strings.Contains(m.Reason, tc.reason) || m.MessageID != tc.id || m.SourceKind != quarantine.SourceKafka || m.DedupeKey == "" {
			t.Errorf("%s: queue %q class %s flags %v id %q reason %q", tc.name, m.Queue, m.FailureClass, m.Flags, m.MessageID, m.Reason)
		}
	}
}

// The dedupe key is the dead-letter record's coordinates and timestamp:
// a redelivery shares it, a re-created topic's record at the same offset
// does not.
func TestDedupeKey(t *testing.T) {
	t.Parallel()
	ts := time.UnixMilli(1_700_000_000_123)
	a := decodeOne(&kgo.Record{Topic: "d", Partition: 1, Offset: 7, Timestamp: ts, Value: []byte("x")})
	b := decodeOne(&kgo.Record{Topic: "d", Partition: 1, Offset: 7, Timestamp: ts, Value: []byte("x")})
	c := decodeOne(&kgo.Record{Topic: "d", Partition: 1, Offset: 7, Timestamp: ts.Add(time.Hour), Value: []byte("x")})
	if a.DedupeKey != "d/1/7:1700000000123" || a.DedupeKey != b.DedupeKey || a.DedupeKey == c.DedupeKey {
		t.Fatalf("dedupe keys %q %q %q", a.DedupeKey, b.DedupeKey, c.DedupeKey)
	}
}

// A stack trace is clipped; a header sent twice keeps both values; a
// header value that is not UTF-8 flags the message.
func TestDecodeHeaders(t *testing.T) {
	t.Parallel()
	r := streamsRecord("dlq", "clicks", 0, 1, []byte("k"), []byte("v"), time.Now(), "E", "m")
	r = set(r, "__streams.errors.stacktrace", strings.Repeat("at x\n", 10000))
	r.Headers = append(r.Headers, kgo.RecordHeader{Key: "tag", Value: []byte("a")}, kgo.RecordHeader{Key: "tag", Value: []byte("b")},
		kgo.RecordHeader{Key: "bin", Value: []byte{0xff}})
	m := decodeOne(r)
	if n := len(m.Headers["__streams.errors.stacktrace"]); n > maxStacktrace+4 || n < maxStacktrace {
		t.Errorf("stack trace of %d bytes kept", n)
	}
	if m.Headers["tag"] != `["a","b"]` || !m.HasFlag(quarantine.FlagInvalidUTF8) || m.Headers[HeaderKey] != "k" {
		t.Errorf("headers %v flags %v", m.Headers["tag"], m.Flags)
	}
}

package kafka

import (
	"encoding/binary"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The records below are dead letters as each framework writes them (the
// header names, value encodings and timestamps of its source code).

// connectRecord is a Kafka Connect errant record: the original key,
// value, headers and timestamp, plus the __connect.errors.* context
// headers as UTF-8 strings.
func connectRecord(dlt, orig string, partition int32, offset int64, key, value []byte, ts time.Time, stage, exc, msg string) *kgo.Record {
	h := []kgo.RecordHeader{
		{Key: "x-idempotency-key", Value: []byte("order:" + strconv.FormatInt(offset, 10))},
		{Key: "__connect.errors.topic", Value: []byte(orig)},
		{Key: "__connect.errors.partition", Value: []byte(strconv.Itoa(int(partition)))},
		{Key: "__connect.errors.offset", Value: []byte(strconv.FormatInt(offset, 10))},
		{Key: "__connect.errors.connector.name", Value: []byte("orders-sink")},
		{Key: "__connect.errors.task.id", Value: []byte("0")},
		{Key: "__connect.errors.stage", Value: []byte(stage)},
		{Key: "__connect.errors.class.name", Value: []byte("org.apache.kafka.connect.json.JsonConverter")},
		{Key: "__connect.errors.exception.class.name", Value: []byte(exc)},
		{Key: "__connect.errors.exception.message", Value: []byte(msg)},
		{Key: "__connect.errors.exception.stacktrace", Value: []byte(exc + ": " + msg + "\n\tat org.apache.kafka.connect.json.JsonConverter.toConnectData(JsonConverter.java:324)")},
	}
	return &kgo.Record{Topic: dlt, Key: key, Value: value, Headers: h, Timestamp: ts}
}

func be32(n int32) []byte { b := make([]byte, 4); binary.BigEndian.PutUint32(b, uint32(n)); return b }
func be64(n int64) []byte { b := make([]byte, 8); binary.BigEndian.PutUint64(b, uint64(n)); return b }

// springRecord is what DeadLetterPublishingRecoverer publishes: the
// original key and value, partition as a 4-byte and offset and timestamp
// as 8-byte big-endian integers, the exception as UTF-8; the record's
// own timestamp is left to the producer (when it was dead-lettered).
func springRecord(dlt, orig string, partition int32, offset int64, key, value []byte, origTS time.Time, fqcn, msg string) *kgo.Record {
	h := []kgo.RecordHeader{
		{Key: "contentType", Value: []byte("application/json")},
		{Key: "kafka_dlt-original-topic", Value: []byte(orig)},
		{Key: "kafka_dlt-original-partition", Value: be32(partition)},
		{Key: "kafka_dlt-original-offset", Value: be64(offset)},
		{Key: "kafka_dlt-original-timestamp", Value: be64(origTS.UnixMilli())},
		{Key: "kafka_dlt-original-timestamp-type", Value: []byte("CreateTime")},
		{Key: "kafka_dlt-original-consumer-group", Value: []byte("orders")},
		{Key: "kafka_dlt-exception-fqcn", Value: []byte(fqcn)},
		{Key: "kafka_dlt-exception-message", Value: []byte(msg)},
		{Key: "kafka_dlt-exception-stacktrace", Value: []byte(fqcn + ": " + msg + "\n\tat com.example.OrderListener.listen(OrderListener.java:42)")},
		{Key: "retry_topic-attempts", Value: be32(3)},
	}
	return &kgo.Record{Topic: dlt, Key: key, Value: value, Headers: h}
}

// streamsRecord is a Kafka Streams (KIP-1034) dead letter: the original
// key, value and timestamp, and the __streams.errors.* headers (the
// exception's toString, message and stack trace, the coordinates).
func streamsRecord(dlt, orig string, partition int32, offset int64, key, value []byte, ts time.Time, exc, msg string) *kgo.Record {
	h := []kgo.RecordHeader{
		{Key: "__streams.errors.exception", Value: []byte(exc + ": " + msg)},
		{Key: "__streams.errors.message", Value: []byte(msg)},
		{Key: "__streams.errors.stacktrace", Value: []byte(exc + ": " + msg + "\n\tat org.apache.kafka.streams.processor.internals.RecordDeserializer.deserialize(RecordDeserializer.java:62)")},
		{Key: "__streams.errors.topic", Value: []byte(orig)},
		{Key: "__streams.errors.partition", Value: []byte(strconv.Itoa(int(partition)))},
		{Key: "__streams.errors.offset", Value: []byte(strconv.FormatInt(offset, 10))},
	}
	return &kgo.Record{Topic: dlt, Key: key, Value: value, Headers: h, Timestamp: ts}
}

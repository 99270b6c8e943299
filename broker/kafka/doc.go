// Package kafka collects dead letters from Kafka dead-letter topics for
// the quarantine collector loop (package collect), and replays them to
// their original topics (replay.Publisher).
//
// # Collecting
//
// A Source drains Config.Topics through the consumer group Config.Group
// (default "quarantine"; a new group starts at the earliest offset).
// Autocommit is off: Ack commits, synchronously, for each partition the
// offset after the longest run of records the store committed, so a
// record is never skipped by a crash, a store outage or a batch committed
// out of turn; what was read but not stored is read again after a restart
// or a rebalance, and the store's dedupe key (DedupeKey: the dead-letter
// record's topic, partition, offset and timestamp) makes that harmless.
//
// A record is recognised, in this order, as:
//
//   - the canonical failure envelope (quarantine.failure/v1) as its value,
//     decoded by collect.DecodeEnvelope;
//   - a Kafka Connect errant record (errors.deadletterqueue.context.headers.enable):
//     __connect.errors.topic, .partition, .offset, .connector.name,
//     .task.id, .stage, .class.name, .exception.class.name,
//     .exception.message, .exception.stacktrace. Class malformed when a
//     converter stage failed, else permanent;
//   - a Spring Kafka dead letter (DeadLetterPublishingRecoverer):
//     kafka_dlt-original-topic, -original-partition (4-byte int),
//     -original-offset, -original-timestamp (8-byte ints),
//     -exception-fqcn, -exception-cause-fqcn, -exception-message,
//     -exception-stacktrace (or the key-exception ones), and
//     retry_topic-attempts. Class malformed for a deserialisation or
//     conversion exception, else exhausted (Spring retries first);
//   - a Kafka Streams dead letter (KIP-1034): __streams.errors.exception,
//     .message, .stacktrace, .topic, .partition, .offset. Class malformed
//     for a (de)serialisation exception, else permanent.
//
// For the native forms the queue is the original topic, the reason the
// exception class and message (with Connect's connector, task and stage),
// the payload the record value byte-exact, the message id the original
// topic/partition/offset, and the headers every record header as text
// (Spring's binary integers in decimal, stack traces clipped to 8 KiB).
// Missing or ill-typed coordinates are listed in the reason and flagged
// malformed. Any other record is stored raw, class unknown, flagged
// malformed. Every message also gets the headers x-kafka-key (or
// x-kafka-key-base64 for a key that is not UTF-8), x-kafka-topic,
// x-kafka-partition, x-kafka-offset and x-kafka-timestamp: the
// dead-letter record's key and coordinates. A record that names no
// original topic gets Config.SourceTopic as its queue, or none: a replay
// never goes back to the dead-letter topic by default.
//
// Collectors that share a group (replicas of one configuration) must share
// the collector name too: the store dedupes per collector.
//
// # Replaying
//
// A Publisher produces each replayed message to its queue (a topic) with
// an idempotent producer and acks=all: the original record key (so that
// per-key order and partitioning hold), the headers less the dead-letter
// bookkeeping (__connect.errors.*, kafka_dlt-*, __streams.errors.*,
// retry_topic-*, x-kafka-*) plus the replay headers. A retriable produce
// error is pending (Refused when the broker answered); an unknown topic, a
// record too large or another refusal fails the item.
//
// # Working
//
// A WorkDriver is the worker package's Driver (and Sender) over a work
// topic: a consumer group with autocommit off that commits a delivery's
// offset once it is settled, never past one not settled. Retries go
// through a retry topic (default "<topic>.retry", consumed by the same
// driver) carrying x-kafka-retry-at: a retry is held until it is due
// with its partition paused, so RetryAfter is honoured as a lower bound
// and new work keeps running meanwhile. Terminal failures go to the
// failure topic as the canonical envelope (keyed like the job), confirmed
// with acks=all before the offset is committed. Kafka counts no
// deliveries: Delivery.Attempt is 0 and the worker's own count
// (x-quarantine-attempts, carried by each retry) is the attempt; a
// delivery that never settled is delivered again but not counted. Reject
// skips the record (Kafka has no rejection policy). With
// WorkConfig.InstanceID the driver is a static member of its group
// (KIP-345), as a collector with instance_id or instance_id_env: a worker
// restarted with its id after a crash gets its partitions back at once
// instead of after the session timeout.
package kafka

// Package rabbitmq drains a RabbitMQ failure queue for the collector loop
// (package collect) with amqp091-go.
//
// A Source holds one connection and one channel with a prefetch (basic.qos)
// and a manual-ack consumer on the configured queue. Receive hands the loop
// up to a batch of decoded deliveries; Ack acknowledges exactly the
// deliveries whose messages committed: with one basic.ack multiple=true on
// the batch's highest tag when every lower unacknowledged tag of the
// channel is in the batch, otherwise one by one. A Source never rejects or
// nacks: on a quorum queue a requeue counts against x-delivery-limit and
// the broker then drops the message.
//
// When the connection or channel is lost (NotifyClose, a closed delivery
// channel, a cancelled consumer), Receive reports an EUNAVAILABLE error and
// the next call dials again. Deliveries from a lost channel cannot be
// acknowledged any more: Ack reports them as an error and the broker
// redelivers them, which the store's dedupe key makes harmless.
//
// # Decoding
//
// Each body is decoded, in this order, as:
//
//  1. the canonical failure envelope (collect.DecodeEnvelope) when it is a
//     JSON object with an "envelope" member;
//  2. a native dead letter when the headers carry x-death or
//     x-first-death-*: Queue is x-first-death-queue (else the queue of the
//     newest x-death entry), and the newest x-death entry gives the failure
//     class (rejected, expired, delivery_limit, and overflow for maxlen: a
//     length limit dropped it, no consumer refused it), Attempts (its
//     count), FailedAt (its time) and the Reason
//     ("rejected from queue orders (x-death count 3)"). Missing or
//     ill-typed fields flag the message malformed and are named in the
//     reason; what could be read is kept;
//  3. anything else: the body is kept byte-exact as the payload, with
//     failure class unknown, the malformed flag and a reason saying that
//     it was neither an envelope nor a dead letter.
//
// The payload is always the body, byte for byte (or the envelope's
// payload). The AMQP headers are kept as strings (non-string values JSON
// encoded; header names or values that are not valid UTF-8 flag the message
// invalid_utf8); message_id, content_type, type (as the job name) and
// timestamp (as EnqueuedAt) are kept. The Config's source_queue, when set,
// overrides the queue.
//
// The dedupe key is "mid:" and the message_id, plus the newest x-death
// entry's count and time when present; without a message_id it is the
// SHA-256 of the body and the headers (sorted by name, x-delivery-count left
// out because a quorum queue changes it on every redelivery).
package rabbitmq

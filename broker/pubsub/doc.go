// Package pubsub collects dead letters from Google Cloud Pub/Sub
// dead-letter topics for the quarantine collector loop (package collect),
// replays them to their source topics (replay.Publisher), and drives
// workers over a Pub/Sub subscription (worker.Driver), with
// cloud.google.com/go/pubsub/v2.
//
// # Collecting
//
// A Source drains Config.Subscription, a subscription on a dead-letter
// topic, through a streaming pull. Each message is acknowledged by Ack
// only, once the store committed it; what is not acknowledged (a crash, a
// store outage) is delivered again after its ack deadline, and the
// store's dedupe key (DedupeKey: the subscription and the message ID)
// makes that harmless. The client extends the ack deadlines of what it
// holds for up to an hour.
//
// A message is recognised, in this order, as:
//
//   - the canonical failure envelope (quarantine.failure/v1) as its data,
//     decoded by collect.DecodeEnvelope;
//   - a message a dead-letter policy forwarded: the attributes
//     CloudPubSubDeadLetterSourceSubscription (the ID of the subscription
//     that gave up), ...SourceSubscriptionProject, ...SourceDeliveryCount
//     (the attempts) and ...SourceTopicPublishTime (the enqueue time),
//     and ...SourceDeliveryErrorMessage where Pub/Sub adds one (the
//     reason). Class exhausted. The queue is the topic of the source
//     subscription, looked up once per subscription (the collector needs
//     pubsub.subscriptions.get on it): the topic's ID when it is in
//     Config.Project, else projects/P/topics/T; when it cannot be looked
//     up, Config.SourceTopic (the reason says why).
//
// Any other message is stored raw, class unknown, flagged malformed, with
// Config.SourceTopic as its queue (or none: a replay never goes back to
// the dead-letter topic by default). pstest, the library's in-process
// server, forwards by its dead-letter policies without adding the
// CloudPubSubDeadLetterSource* attributes, so its dead letters are such
// messages.
//
// The payload is the data byte-exact; the headers are the attributes
// (the idempotency rules read them), plus x-pubsub-message-id,
// x-pubsub-publish-time (the dead-letter message's), x-pubsub-subscription
// (the collector's), x-pubsub-ordering-key and x-pubsub-source-topic.
//
// # Replaying
//
// A Publisher publishes each replayed message to its queue, a topic (an
// ID in Config.Project, or projects/P/topics/T), with the ordering key
// from x-pubsub-ordering-key and the headers as attributes less the
// bookkeeping (CloudPubSubDeadLetterSource*, x-pubsub-*), plus the replay
// headers. A missing topic, an invalid message or a permission denied
// fails the item; a refusal for now (resource exhausted, aborted,
// internal) is pending and refused; an unreachable service is pending.
// Note that a topic delivers to every subscription on it: a replay to the
// source topic reaches the other subscribers too (the worker's claims
// absorb a job already done; other consumers need their own idempotency).
//
// # Working
//
// A WorkDriver is the worker package's Driver (and Sender) over a work
// subscription, pulled with unary Pull calls. Retry sets the delivery's
// ack deadline to the delay (at most 600 s, so RetryAfter is a lower
// bound and the same message comes back, its delivery count going on);
// the worker's retry headers are kept in memory for the redelivery.
// DeadLetter publishes the canonical envelope to the failure topic and
// acknowledges once the service confirmed it; Reject nacks (the
// subscription's dead-letter policy decides); Extend renews the ack
// deadline. Give the work subscription a dead-letter policy so that
// Pub/Sub counts deliveries (Delivery.Attempt) across restarts.
package pubsub

// Package sqs drains an Amazon SQS dead-letter queue into the quarantine:
// Source implements collect.Source and collect.Extender with
// aws-sdk-go-v2.
//
// # Decoding
//
// Several receivers long-poll the queue (10 messages per call, message and
// system attributes included). A body whose top-level JSON object has an
// "envelope" member is read by collect.DecodeEnvelope (the canonical
// failure envelope; a broken one is stored raw and classed malformed).
// Any other body is the native form of a queue whose redrive policy moved
// the job there after maxReceiveCount receives: it is stored byte-exact
// with failure class exhausted (SQS gave up after the retries the policy
// allows), a reason "moved to DLQ by SQS redrive after N receives",
// ApproximateReceiveCount as attempts, SentTimestamp as the enqueue time
// (a standard queue keeps it across a redrive) and the message attributes
// as headers (String and Number values as they are, others JSON-encoded).
// An empty body, or one that is not UTF-8, is classed malformed and
// flagged. SQS does not say which queue a redriven message came from, so
// Config.SourceQueue names it: the message's queue and default replay
// destination. The dedupe key is the SQS MessageId, which every
// redelivery of a message shares.
//
// # Acknowledgement
//
// After the collector commits a batch, Ack deletes it with
// DeleteMessageBatch and retries the entries that failed on the server's
// side; while a slow or failing store holds a batch, Extend renews its
// visibility timeout (ChangeMessageVisibility per message). A deletion
// that cannot be confirmed leaves the message to be redelivered, and the
// dedupe key makes that a no-op. Messages fetched ahead but never handed
// to the collector are made visible again by Close, or skipped when they
// waited too long to be acknowledged in time.
//
// # Emulators
//
// For the goaws emulator set Endpoint and Protocol "query": goaws speaks
// nothing else. Its quirks do not change what this package does:
// ApproximateReceiveCount stays 1, the queue's own VisibilityTimeout wins
// over the one asked for on receive, a redrive happens one receive later
// than on AWS, and SendMessageBatch drops message attributes.
package sqs

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
// allows) and the message attributes as headers (String and Number values
// as they are, others JSON-encoded). SQS keeps counting receives across
// the move and keeps the source queue's timestamps, so the first receive
// from the dead-letter queue gives attempts (ApproximateReceiveCount less
// that receive: "moved to DLQ by SQS redrive after N receives"), the first
// failure (ApproximateFirstReceiveTimestamp, when a worker first got the
// job) and the enqueue time (SentTimestamp; a FIFO queue resets it to the
// move, which is then the failure time). A standard queue does not report
// when it moved the message: the failure time is when the collector first
// received it from the dead-letter queue, moments after the move while the
// collector runs. A receive count of 1 means the count and times started
// afresh in the dead-letter queue (a message sent there directly, or
// goaws): attempts are then 0 and the reason says they are unknown.
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
// ApproximateReceiveCount stays 1 and SentTimestamp and
// ApproximateFirstReceiveTimestamp are the time of each receive (so a
// redriven message's attempts are unknown and its failure time is the
// collector's receive), the queue's own VisibilityTimeout wins
// over the one asked for on receive, a redrive happens one receive later
// than on AWS, and SendMessageBatch drops message attributes.
package sqs

package replay

import (
	"context"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// Headers every replayed message carries.
const (
	HeaderReplayID       = "x-quarantine-replay-id"   // the batch id
	HeaderReplayedBy     = "x-quarantine-replayed-by" // the actor who created the batch
	HeaderOriginalID     = "x-quarantine-original-id" // the quarantine's message id
	HeaderIdempotencyKey = "x-idempotency-key"        // the key, when the message has one
	HeaderJobName        = "x-quarantine-job-name"    // the job name, when known
)

// Outgoing is one message to publish, as the engine prepared it: the
// latest payload, the original content type and headers less broker
// bookkeeping and redacted ones, plus the replay headers.
type Outgoing struct {
	// Queue is the destination: a RabbitMQ queue (default exchange), an
	// SQS queue name, a NATS subject, or the queue an HTTP receiver routes
	// by.
	Queue string
	// MessageID is a fresh transport message id, unique per item and
	// stable across republishes of the same item (batch id + message id),
	// so that a broker with deduplication (NATS Nats-Msg-Id) can drop a
	// republish.
	MessageID      string
	IdempotencyKey string
	JobName        string
	ContentType    string
	Payload        []byte
	Headers        map[string]string
	// Message is the quarantined message (read only), for publishers that
	// send the canonical envelope (HTTP).
	Message *quarantine.Message
}

// Result is the broker's answer for one Outgoing.
type Result struct {
	// Outcome is ItemPublished, ItemDeduplicated or ItemFailed, or
	// ItemPending when the message was not published and should be tried
	// again later (Err says why): the broker is unreachable, or asked to
	// slow down (RetryAfter).
	Outcome    quarantine.ItemOutcome
	Err        error         // the reason, for failed and pending
	RetryAfter time.Duration // for pending: how long the destination asked to wait (0: the engine's backoff)
	// Refused, for pending, says that the destination answered and
	// refused the message for now (a broker's nack, a full queue,
	// throttling) rather than not answering (a lost connection): the
	// engine retries it a bounded number of times (Config.PublishAttempts)
	// before the item fails.
	Refused bool
}

// Publisher sends replayed messages to one broker and waits for its
// confirmation. Implementations live in broker/*.
type Publisher interface {
	// Publish sends msgs and returns one Result per message, in order,
	// once every one is confirmed or refused. It never returns
	// ItemPublished for a message the broker did not confirm. An
	// unroutable message or a missing queue is ItemFailed; a connection
	// failure is ItemPending for every unconfirmed message. Safe for
	// concurrent use.
	Publish(ctx context.Context, msgs []Outgoing) []Result
	// Close releases the connection.
	Close() error
}

// Connector is a Publisher that can connect to its broker ahead of its
// first publish. The engine connects it before it takes the first slots
// of a destination, which then need no lead for the connection
// (maxLead otherwise).
type Connector interface {
	// Connect connects, unless connected already; an error leaves the
	// connection to the next Publish.
	Connect(ctx context.Context) error
}

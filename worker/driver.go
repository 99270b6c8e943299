package worker

import (
	"context"
	"strings"
	"time"
)

// Header names of a job message (see the package documentation, "Wire
// format"). The first four are the names the replay engine publishes
// (replay.Header*).
const (
	HeaderIdempotencyKey = "x-idempotency-key"
	HeaderJobName        = "x-quarantine-job-name"
	HeaderReplayID       = "x-quarantine-replay-id"
	HeaderOriginalID     = "x-quarantine-original-id"
	// HeaderSchemaVersion is the schema version of the payload. It has no
	// x-quarantine- prefix so that a replay keeps it (the replay engine
	// drops x-quarantine-* bookkeeping and sets its own).
	HeaderSchemaVersion = "x-schema-version"
	// HeaderEnqueuedAt is when Dispatch sent the job (RFC 3339).
	HeaderEnqueuedAt = "x-quarantine-enqueued-at"
	// HeaderAttempts is the number of attempts already made, set by the
	// worker on a retry for drivers that republish (the count survives a
	// backend that forgets it).
	HeaderAttempts = "x-quarantine-attempts"
	// HeaderFirstFailedAt is when the first attempt failed (RFC 3339),
	// set by the worker on the first retry.
	HeaderFirstFailedAt = "x-quarantine-first-failed-at"
	// HeaderDelivered is the backend's delivery count (Delivery.Attempt)
	// of the delivery a retry settled, set by the worker on every retry
	// through a driver whose count goes on across a retry
	// (Limits.RetryKeepsCount): the deliveries counted after it that
	// the worker did not settle (a process that died) are attempts.
	HeaderDelivered = "x-quarantine-delivered"
	// HeaderNotBefore is the earliest time the job may run again (RFC
	// 3339), set by the worker when a retry asked for a delay longer than
	// the driver takes (Limits.MaxDelay): a delivery arriving before it
	// is deferred again without running and without counting an attempt.
	HeaderNotBefore = "x-quarantine-not-before"
)

// bookkeeping reports whether name is one of the worker's own headers,
// left out of the failure envelope.
func bookkeeping(name string) bool {
	switch strings.ToLower(name) {
	case HeaderAttempts, HeaderFirstFailedAt, HeaderDelivered, HeaderNotBefore:
		return true
	}
	return false
}

// Delivery is one job message as a driver received it. The driver fills
// it; the worker reads it and may add HeaderAttempts and
// HeaderFirstFailedAt to Headers before calling Driver.Retry.
type Delivery struct {
	// ID is the transport message id (the job id in the failure envelope).
	ID string
	// Queue is the work queue the message came from.
	Queue string
	// JobName is the job name as the backend carries it natively (an AMQP
	// type property, an SQS attribute); empty to use HeaderJobName.
	JobName string
	// Headers are the message's headers or attributes, names as sent.
	Headers map[string]string
	// Body is the payload, as published.
	Body        []byte
	ContentType string
	// Attempt is the backend's delivery count, 1 for the first delivery
	// (0 when the backend does not count). With HeaderAttempts (h) the
	// worker's attempt is h+1 plus the deliveries of the backend's count
	// since that retry beyond the first (those that never settled):
	// Attempt-HeaderDelivered when Limits.RetryKeepsCount, else
	// Attempt-1. Without HeaderAttempts it is Attempt (at least 1).
	Attempt int
	// EnqueuedAt is when the message was first sent, if the backend knows.
	EnqueuedAt time.Time
	// Ref is the driver's own handle (delivery tag, receipt handle, ...).
	Ref any
}

// Header returns the value of header name, matched case-insensitively.
func (d *Delivery) Header(name string) string {
	if v, ok := d.Headers[name]; ok {
		return v
	}
	for k, v := range d.Headers {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}

// Limits is what a driver declares about its backend.
type Limits struct {
	// MaxDelay is the longest delay Retry accepts (SQS: 15 min); 0 for no
	// limit. A job whose backoff can exceed it is refused by Register; a
	// longer delay asked at run time (RetryAfter, a held claim) is
	// settled with MaxDelay and HeaderNotBefore, and deferred again
	// until that time without running or counting.
	MaxDelay time.Duration
	// DelayStep is the granularity of delays (SQS: 1 s): the worker
	// rounds every delay up to a multiple of it. 0 for none.
	DelayStep time.Duration
	// RenewEvery is how often the worker calls Extend while a handler
	// runs (NATS: half the AckWait; SQS: half the visibility timeout);
	// 0 for never.
	RenewEvery time.Duration
	// MaxRenew caps the total time a delivery is kept by renewals (SQS:
	// 12 h); 0 for no cap.
	MaxRenew time.Duration
	// RetryKeepsCount says that Retry redelivers the same message, whose
	// delivery count (Delivery.Attempt) goes on from the retried
	// delivery's (broker/memory, NATS NakWithDelay); false when Retry
	// sends a new message whose count starts again (RabbitMQ, SQS). The
	// worker then records the count in HeaderDelivered so that the
	// retries it does not count (see the package documentation) are not
	// counted by the backend either.
	RetryKeepsCount bool
}

// Driver is the backend the worker consumes: one work queue and its
// failure queue. Every settlement method is called at most once per
// Delivery and only for deliveries Receive returned; it returns an error
// when the backend did not accept the settlement (then the delivery is
// left to the backend's redelivery). Implementations are safe for
// concurrent use.
type Driver interface {
	// Receive blocks until at least one delivery is available (at most
	// max) or ctx ends (then it returns ctx's error).
	Receive(ctx context.Context, max int) ([]*Delivery, error)
	// Ack settles d as done: the backend forgets it.
	Ack(ctx context.Context, d *Delivery) error
	// Retry settles d so that it is delivered again after delay (already
	// within Limits and rounded to DelayStep), carrying d.Headers and
	// d.Body.
	Retry(ctx context.Context, d *Delivery, delay time.Duration) error
	// DeadLetter publishes envelope (the canonical failure envelope,
	// JSON) to the failure queue, waits for the backend to confirm it,
	// and only then settles d on the work queue.
	DeadLetter(ctx context.Context, d *Delivery, envelope []byte) error
	// Reject settles d by the backend's rejection policy (dead-letter
	// exchange, redrive, Term).
	Reject(ctx context.Context, d *Delivery) error
	// Extend renews d's lease (visibility timeout, InProgress) while its
	// handler runs.
	Extend(ctx context.Context, d *Delivery) error
	// Limits describes the backend's delays and leases.
	Limits() Limits
}

// DelayValidator is an optional Driver capability: a backend with a
// restricted set of delays (RabbitMQ delay buckets) says whether it can
// honour d. Register calls it with the largest delay a job can ask for.
type DelayValidator interface {
	ValidateDelay(d time.Duration) error
}

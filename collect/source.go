package collect

import (
	"context"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// Delivery is one broker message handed to the collector: the decoded
// message and the handle its source needs to acknowledge it.
type Delivery struct {
	Message *quarantine.Message
	// Handle is opaque to the collector: a delivery tag, a receipt handle,
	// a JetStream message. Only the Source that made it reads it.
	Handle any
}

// Handles are the handles of ds, each of type H, as the Source of broker
// (its name, for the error) made them. Errors are EINTERNAL for a
// delivery another source made.
func Handles[H any](ds []Delivery, broker string) ([]H, error) {
	hs := make([]H, len(ds))
	for i, d := range ds {
		h, ok := d.Handle.(H)
		if !ok {
			return nil, quarantine.Errorf(quarantine.EINTERNAL, "%s: delivery %d was not made by this source", broker, i)
		}
		hs[i] = h
	}
	return hs, nil
}

// Source is a broker's failure queue as the collector loop needs it.
// broker/rabbitmq, broker/sqs and broker/nats implement it.
//
// A Source reconnects by itself: when its connection is lost, Receive
// returns an error (the loop backs off and calls Receive again) and the
// next call dials anew. Deliveries received on a lost connection cannot be
// acknowledged any more; Ack reports that as an error and the broker
// redelivers them, which the store's dedupe key makes harmless.
type Source interface {
	// Receive blocks until at least one message is available or ctx ends,
	// then returns up to max deliveries, waiting at most linger after the
	// first for more. Each delivery's Message is decoded (native broker
	// form or the failure envelope; undecodable bytes kept raw and
	// flagged) with Source and SourceKind set; a bad message never makes
	// Receive fail.
	Receive(ctx context.Context, max int, linger time.Duration) ([]Delivery, error)

	// Ack acknowledges exactly ds, whose messages are committed to the
	// store. It returns once the broker confirmed, where it can.
	Ack(ctx context.Context, ds []Delivery) error

	// Close releases the connection. Unacknowledged deliveries return to
	// the broker.
	Close() error
}

// Extender is implemented by sources whose deliveries expire while held
// (an SQS visibility timeout, a JetStream AckWait). While a batch waits for
// a slow or failing store, the collector calls Extend every ExtendEvery.
type Extender interface {
	Extend(ctx context.Context, ds []Delivery) error
	ExtendEvery() time.Duration
}

// Windowed is implemented by sources whose broker sends deliveries ahead
// only up to a window (RabbitMQ's prefetch). Before its first Receive the
// collector tells the source how many deliveries it holds at most,
// (Commits+1) × BatchSize, so that a window left to its default lets the
// broker send the batch received while the others commit.
type Windowed interface {
	SetWindow(messages int)
}

// Package collecttest helps the broker packages' tests wait on a
// collector's events instead of sleeping.
package collecttest

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/quarantine-dev/quarantine/collect"
)

var (
	_ collect.Source   = (*Acks)(nil)
	_ collect.Extender = (*Acks)(nil)
	_ collect.Windowed = (*Acks)(nil)
)

// Acks is a collect.Source that counts the Ack calls of the source it
// wraps. It passes Extend and SetWindow on when the wrapped source has
// them (ExtendEvery is 0 otherwise, which the collector reads as "never").
type Acks struct {
	collect.Source
	inFlight atomic.Int32
	calls    atomic.Uint64
}

// NewAcks wraps src.
func NewAcks(src collect.Source) *Acks { return &Acks{Source: src} }

// Ack acknowledges through the wrapped source, counting the call.
func (a *Acks) Ack(ctx context.Context, ds []collect.Delivery) error {
	a.inFlight.Add(1)
	defer a.inFlight.Add(-1)
	a.calls.Add(1)
	return a.Source.Ack(ctx, ds)
}

// InFlight is the number of Ack calls not returned yet.
func (a *Acks) InFlight() int { return int(a.inFlight.Load()) }

// Calls is the number of Ack calls made.
func (a *Acks) Calls() uint64 { return a.calls.Load() }

// Extend passes on to the wrapped source.
func (a *Acks) Extend(ctx context.Context, ds []collect.Delivery) error {
	if ex, ok := a.Source.(collect.Extender); ok {
		return ex.Extend(ctx, ds)
	}
	return nil
}

// ExtendEvery passes on to the wrapped source; 0 when it has no Extend.
func (a *Acks) ExtendEvery() time.Duration {
	if ex, ok := a.Source.(collect.Extender); ok {
		return ex.ExtendEvery()
	}
	return 0
}

// SetWindow passes on to the wrapped source.
func (a *Acks) SetWindow(messages int) {
	if w, ok := a.Source.(collect.Windowed); ok {
		w.SetWindow(messages)
	}
}

// QuietAfterStoreLoss reports whether the collector c, acknowledging
// through a, has stopped acknowledging because its store is gone: the
// store failed three times (the first failure and two retries, each after
// a backoff) and no Ack is in flight. A batch the store accepted before
// the loss either acknowledged long before the second retry, or waits for
// its turn behind a batch that keeps failing and cannot acknowledge until
// the store is back. Outage tests wait on it instead of sleeping past "an
// acknowledgement in flight at the cut".
func QuietAfterStoreLoss(c *collect.Collector, a *Acks) bool {
	return c.Stats().Errors[collect.ErrStore] >= 3 && a.InFlight() == 0
}

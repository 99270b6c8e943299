package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
)

// ActionCollectLost is the audit action recorded when mode (b) learns of
// a given-up message that was deleted from its stream before the
// collector could fetch it.
const ActionCollectLost = "collect.lost"

// AuditFunc appends one event to the audit log (store.AppendAudit).
type AuditFunc func(context.Context, quarantine.AuditEvent) error

var (
	_ collect.Source   = (*Source)(nil)
	_ collect.Extender = (*Source)(nil)
)

// Source is a JetStream failure source for the collector loop, in either
// mode of Config. It dials lazily: the first Receive connects, sets up the
// consumer (and, in mode b, the capture stream), and later calls reuse the
// connection, which the client reconnects by itself.
type Source struct {
	name string
	cfg  Config
	log  *slog.Logger

	// poll bounds one wait for the first message of a batch; settle is how
	// long reconciliation waits before it hands out what it found;
	// retryLost is how soon an advisory whose lost event could not be
	// recorded comes back.
	poll, settle, retryLost time.Duration

	mu     sync.Mutex
	link   *link
	closed bool
	audit  AuditFunc

	// Mode (b) state, used by the goroutine that calls Receive and Ack.
	adv *advisoryState
}

// NewSource returns the source of the collector named name. It does not
// dial: the first Receive does. c must be valid (c.Validate).
func NewSource(name string, c Config, logger *slog.Logger) (*Source, error) {
	logger, err := collect.CheckSource(name, c.Validate(), logger)
	if err != nil {
		return nil, err
	}
	c = c.withDefaults(name)
	s := &Source{
		name:      name,
		cfg:       c,
		log:       logger.With("component", "nats", "collector", name),
		poll:      time.Second,
		settle:    500 * time.Millisecond,
		retryLost: 5 * time.Second,
	}
	if c.AdvisoryMode() {
		s.adv = newAdvisoryState()
	}
	return s, nil
}

// SetAudit sets where mode (b) records collect.lost events: the wiring
// passes store.AppendAudit. Without it a lost message is logged at error
// level only. Call it before the first Receive.
func (s *Source) SetAudit(f AuditFunc) {
	s.mu.Lock()
	s.audit = f
	s.mu.Unlock()
}

// Config returns the source's configuration with its defaults filled.
func (s *Source) Config() Config { return s.cfg }

// Receive returns the next batch: up to max deliveries, waiting at most
// linger after the first for more. It blocks until one is available or
// ctx ends. A message that cannot be decoded is delivered raw and flagged,
// never an error. Errors are EUNAVAILABLE when the server cannot be
// reached or the consumer cannot be set up.
func (s *Source) Receive(ctx context.Context, limit int, linger time.Duration) ([]collect.Delivery, error) {
	limit = min(max(limit, 1), maxBatch)
	l, err := s.connect(ctx)
	if err != nil {
		return nil, err
	}
	if s.cfg.AdvisoryMode() {
		return s.receiveAdvisories(ctx, l, limit, linger)
	}
	return s.receiveFailures(ctx, l, limit, linger)
}

// handle is what Ack needs of one delivery.
type handle struct {
	msg jetstream.Msg // the delivery to acknowledge: a failure or an advisory; nil for a reconciled message
	// Mode (b): the original message, deleted after the store when
	// configured. seq is 0 when there is none (a malformed advisory).
	worker jetstream.Stream
	seq    uint64
}

// Ack acknowledges exactly ds and waits for the server to confirm each
// acknowledgement (double ack). In mode (b) it then deletes the original
// messages from the worker stream when DeleteAfterStore is set. An error
// (EUNAVAILABLE) says how many were not confirmed; those are redelivered
// and the store's dedupe key makes that harmless.
func (s *Source) Ack(ctx context.Context, ds []collect.Delivery) error {
	hs, err := collect.Handles[handle](ds, "nats")
	if err != nil {
		return err
	}
	errs := parallel(len(hs), ackConcurrency, func(i int) error {
		if hs[i].msg == nil {
			return nil
		}
		err := hs[i].msg.DoubleAck(ctx)
		if errors.Is(err, jetstream.ErrMsgAlreadyAckd) {
			return nil
		}
		return err
	})
	failed, first := countErrors(errs)
	if s.adv != nil {
		s.afterStore(ctx, hs, errs)
	}
	if failed > 0 {
		return &quarantine.Error{Code: quarantine.EUNAVAILABLE, Err: first,
			Message: fmt.Sprintf("nats: %d of %d acknowledgements not confirmed; they will be redelivered", failed, len(ds))}
	}
	return nil
}

// Extend tells the server that ds are still being worked on, which
// restarts their AckWait.
func (s *Source) Extend(_ context.Context, ds []collect.Delivery) error {
	var first error
	for _, d := range ds {
		h, _ := d.Handle.(handle)
		if h.msg == nil {
			continue
		}
		if err := h.msg.InProgress(); err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		return &quarantine.Error{Code: quarantine.EUNAVAILABLE, Message: "nats: could not extend held deliveries", Err: first}
	}
	return nil
}

// ExtendEvery is a third of AckWait.
func (s *Source) ExtendEvery() time.Duration { return s.cfg.AckWait / 3 }

// Close closes the connection. Deliveries not acknowledged return to the
// stream after AckWait.
func (s *Source) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.link != nil {
		s.link.nc.Close()
		s.link = nil
	}
	return nil
}

// Limits of one batch and of the acknowledgements in flight.
const (
	maxBatch       = 10000
	ackConcurrency = 256
)

// parallel runs fn(0..n-1) with at most conc running at once and returns
// their errors by index.
func parallel(n, conc int, fn func(i int) error) []error {
	errs := make([]error, n)
	if n == 1 {
		errs[0] = fn(0)
		return errs
	}
	sem := make(chan struct{}, conc)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = fn(i)
		}()
	}
	wg.Wait()
	return errs
}

func countErrors(errs []error) (n int, first error) {
	for _, err := range errs {
		if err != nil {
			if first == nil {
				first = err
			}
			n++
		}
	}
	return n, first
}

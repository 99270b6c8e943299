package rabbitmq

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
	"github.com/quarantine-dev/quarantine/internal/redacturl"
)

var _ collect.Source = (*Source)(nil)

// Source is a RabbitMQ failure queue as the collector loop drains it. It
// is safe for concurrent use; the loop calls Receive and Ack in turn.
type Source struct {
	name string
	cfg  Config
	log  *slog.Logger
	dec  decoder

	mu     sync.Mutex
	sess   *session // nil until dialled, and after a loss
	window int      // what the collector holds at most (SetWindow), 0 if unknown
}

// SetWindow is how many deliveries the collector holds at most; it is the
// prefetch when Config.Prefetch is 0. It applies from the next dial.
func (s *Source) SetWindow(messages int) {
	s.mu.Lock()
	s.window = messages
	s.mu.Unlock()
}

// NewSource returns a Source for the collector called name. It validates c
// (EINVALID naming the key) and does not dial: the first Receive does.
// A nil logger logs nowhere.
func NewSource(name string, c Config, logger *slog.Logger) (*Source, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Source{
		name: name,
		cfg:  c,
		log:  logger.With("component", "rabbitmq", "collector", name),
		dec:  decoder{source: name, sourceQueue: c.SourceQueue},
	}, nil
}

// Receive blocks until a delivery arrives or ctx ends, then returns up to
// max decoded deliveries, waiting at most linger after the first for more.
// It dials first when there is no live connection, with the configured
// prefetch (see Config.Prefetch). A lost connection, channel or consumer is an
// EUNAVAILABLE error; the deliveries already taken from it are dropped (the
// broker redelivers them) and the next call dials again. When ctx ends after
// the first delivery, what was received is returned without error.
func (s *Source) Receive(ctx context.Context, max int, linger time.Duration) ([]collect.Delivery, error) {
	if max <= 0 {
		max = 1
	}
	sess, err := s.session(max)
	if err != nil {
		return nil, err
	}
	var (
		out   []collect.Delivery
		timer *time.Timer
		wait  <-chan time.Time
	)
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	take := func(d *amqp.Delivery) {
		s.mu.Lock()
		sess.track(d.DeliveryTag)
		s.mu.Unlock()
		out = append(out, collect.Delivery{Message: s.dec.decode(d), Handle: handle{sess: sess, tag: d.DeliveryTag}})
	}
	for len(out) < max {
		if len(out) == 1 && linger > 0 && timer == nil {
			timer = time.NewTimer(linger)
			wait = timer.C
		}
		if len(out) > 0 && linger <= 0 {
			// No linger: take what is already here, without waiting.
			select {
			case d, ok := <-sess.deliveries:
				if !ok {
					return nil, s.lost(sess, nil)
				}
				take(&d)
				continue
			default:
				return out, nil
			}
		}
		select {
		case d, ok := <-sess.deliveries:
			if !ok {
				return nil, s.lost(sess, nil)
			}
			take(&d)
		case e := <-sess.closed:
			return nil, s.lost(sess, e)
		case <-wait:
			return out, nil
		case <-ctx.Done():
			if len(out) > 0 {
				return out, nil
			}
			return nil, ctx.Err()
		}
	}
	return out, nil
}

// Ack acknowledges exactly ds (see the package documentation for how).
// Deliveries from a connection that is gone, or already acknowledged, are
// not acknowledged: the error says how many, and the broker redelivers
// them. AMQP 0-9-1 does not confirm acks: Ack returns once they are
// written to the connection (Close waits for the broker to close it, so
// acks sent before Close are processed).
func (s *Source) Ack(ctx context.Context, ds []collect.Delivery) error {
	if len(ds) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	bySess := map[*session][]uint64{}
	foreign := 0
	for _, d := range ds {
		h, ok := d.Handle.(handle)
		if !ok || h.sess == nil {
			foreign++
			continue
		}
		bySess[h.sess] = append(bySess[h.sess], h.tag)
	}
	if foreign > 0 {
		return quarantine.Errorf(quarantine.EINTERNAL, "rabbitmq: %d deliveries were not received by this source", foreign)
	}
	stale, unknown := 0, 0
	var ackErr *quarantine.Error
	for sess, tags := range bySess {
		if sess == s.sess && !sess.dead && sess.ch.IsClosed() {
			s.lostLocked(sess, amqp.ErrClosed) // the next Receive dials anew
		}
		if sess.dead || sess != s.sess {
			stale += len(tags)
			continue
		}
		slices.Sort(tags)
		tags = slices.Compact(tags)
		live := tags[:0]
		for _, t := range tags {
			if sess.has(t) {
				live = append(live, t)
			} else {
				unknown++
			}
		}
		if len(live) == 0 {
			continue
		}
		if err := sess.ack(live); err != nil {
			ackErr = s.lostLocked(sess, err)
			stale += len(live)
		}
	}
	switch {
	case ackErr != nil:
		ackErr.Message += "; the broker redelivers the unacknowledged deliveries"
		return ackErr
	case stale > 0:
		return quarantine.Errorf(quarantine.EUNAVAILABLE,
			"rabbitmq: %d deliveries came on a connection that is gone and cannot be acknowledged; the broker redelivers them", stale)
	case unknown > 0:
		return quarantine.Errorf(quarantine.EINTERNAL, "rabbitmq: %d deliveries were already acknowledged", unknown)
	}
	return nil
}

// Close closes the connection; unacknowledged deliveries return to the
// queue. Receive after Close dials again.
func (s *Source) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sess == nil {
		return nil
	}
	sess := s.sess
	sess.dead, s.sess = true, nil
	if err := sess.close(); err != nil {
		return unavailable(err, "closing the connection")
	}
	return nil
}

// session returns the live session, dialling when there is none.
func (s *Source) session(max int) (*session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sess != nil && !s.sess.dead {
		return s.sess, nil
	}
	prefetch := s.cfg.Prefetch
	if prefetch == 0 {
		// What the collector holds: the batches it commits and the one it
		// receives meanwhile, which the broker must be allowed to send.
		prefetch = s.window
		if prefetch == 0 {
			prefetch = (collect.DefaultCommits + 1) * max
		}
		prefetch = min(prefetch, 65535)
	}
	sess, err := dial(s.cfg, s.name, prefetch)
	if err != nil {
		return nil, err
	}
	s.sess = sess
	s.log.Info("consuming", "queue", s.cfg.Queue, "prefetch", prefetch, "url", redacturl.URL(s.cfg.URL))
	return sess, nil
}

// lost marks sess gone after its channel closed (cause may be nil).
func (s *Source) lost(sess *session, cause *amqp.Error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error = amqp.ErrClosed
	if cause != nil {
		err = cause
	}
	return s.lostLocked(sess, err)
}

func (s *Source) lostLocked(sess *session, cause error) *quarantine.Error {
	if !sess.dead {
		sess.dead = true
		_ = sess.close()
		s.log.Warn("connection lost: reconnecting on the next receive", "queue", s.cfg.Queue,
			"unacknowledged", len(sess.outstanding), "err", cause)
	}
	if s.sess == sess {
		s.sess = nil
	}
	return unavailable(cause, "the connection to queue %s was lost", word(s.cfg.Queue))
}

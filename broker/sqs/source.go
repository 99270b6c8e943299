package sqs

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
)

var (
	_ collect.Source   = (*Source)(nil)
	_ collect.Extender = (*Source)(nil)
)

// Source drains one SQS dead-letter queue for a collector.
//
// Receivers (Config.Receivers goroutines, started by the first Receive)
// long-poll the queue for 10 messages at a time and hand them over; each
// receiver holds at most one batch that Receive has not taken, so what is
// fetched ahead stays small. A message held longer than three quarters of
// its visibility timeout before Receive takes it is not handed out: it will
// reappear on the queue and be received afresh.
type Source struct {
	name   string
	cfg    Config
	origin origin
	client *awssqs.Client
	log    *slog.Logger
	now    func() time.Time

	polls chan poll     // receivers -> Receive
	done  chan struct{} // closed by Close

	mu      sync.Mutex
	started bool
	closed  bool
	stop    context.CancelFunc // ends the receivers' loops
	abort   context.CancelFunc // ends their ReceiveMessage calls in flight
	pending []held             // received, not yet handed out
	wg      sync.WaitGroup

	// waiting counts the receivers holding a fetched batch that Receive
	// has not taken yet, and blocked the Receive calls waiting for one
	// (tests wait on them instead of sleeping).
	waiting, blocked atomic.Int32
}

// poll is what one receiver call produced: messages or an error.
type poll struct {
	msgs []held
	err  error
}

// held is a received message and when it was received.
type held struct {
	msg types.Message
	at  time.Time
}

// handle is the Handle of a Delivery made by Source.
type handle struct {
	receipt string // the receipt handle of this receive
}

// NewSource returns the source of the collector named name. It validates a
// copy of c (EINVALID naming the key) and reads the AWS configuration, but
// does not dial: the first Receive starts the receivers.
func NewSource(name string, c Config, logger *slog.Logger) (*Source, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.Default()
	}
	log := logger.With("component", "sqs", "collector", name)
	client, err := newClient(context.Background(), c, log)
	if err != nil {
		return nil, err
	}
	return &Source{
		name:   name,
		cfg:    c,
		origin: origin{name: name, sourceQueue: c.SourceQueue, fifo: strings.HasSuffix(c.QueueURL, ".fifo")},
		client: client,
		log:    log,
		now:    time.Now,
		polls:  make(chan poll),
		done:   make(chan struct{}),
	}, nil
}

// Receive returns up to max deliveries, blocking until at least one
// arrives or ctx ends and then waiting at most linger for more. When no
// message has arrived yet and a receiver failed (the queue cannot be
// reached, say), it returns that error as an EUNAVAILABLE (or ENOTFOUND,
// EUNAUTHORIZED, EFORBIDDEN) *quarantine.Error; the receivers retry with
// backoff by themselves. After Close (or when Close ends a blocked
// Receive) it returns ECONFLICT.
func (s *Source) Receive(ctx context.Context, max int, linger time.Duration) ([]collect.Delivery, error) {
	if err := s.start(); err != nil {
		return nil, err
	}
	if max <= 0 {
		max = 1
	}
	var out []collect.Delivery
	var lingerC <-chan time.Time
	for len(out) < max {
		if out = s.take(out, max); len(out) >= max {
			break
		}
		if len(out) > 0 && lingerC == nil {
			t := time.NewTimer(linger)
			defer t.Stop()
			lingerC = t.C
		}
		s.blocked.Add(1)
		select {
		case <-ctx.Done():
			s.blocked.Add(-1)
			if len(out) > 0 {
				return out, nil
			}
			return nil, ctx.Err()
		case <-lingerC:
			s.blocked.Add(-1)
			return out, nil
		case <-s.done:
			s.blocked.Add(-1)
			return out, closedError(s.name)
		case p := <-s.polls:
			s.blocked.Add(-1)
			if p.err != nil {
				if len(out) > 0 {
					return out, nil
				}
				return nil, p.err
			}
			s.mu.Lock()
			s.pending = append(s.pending, p.msgs...)
			s.mu.Unlock()
		}
	}
	return out, nil
}

// take moves pending messages into out, up to max, skipping (and leaving
// to SQS to redeliver) those held too long to be acknowledged in time.
func (s *Source) take(out []collect.Delivery, max int) []collect.Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	usable := s.cfg.VisibilityTimeout * 3 / 4
	i := 0
	for ; i < len(s.pending) && len(out) < max; i++ {
		h := s.pending[i]
		if now.Sub(h.at) > usable {
			s.log.Debug("message held too long before the collector took it: left to redelivery", "message_id", deref(h.msg.MessageId))
			continue
		}
		msg := decode(s.origin, h.msg, h.at)
		out = append(out, collect.Delivery{Message: msg, Handle: handle{receipt: deref(h.msg.ReceiptHandle)}})
	}
	s.pending = append(s.pending[:0], s.pending[i:]...)
	return out
}

// start launches the receivers once.
func (s *Source) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return closedError(s.name)
	}
	if s.started {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	calls, abort := context.WithCancel(context.Background())
	s.stop, s.abort = cancel, abort
	s.started = true
	for i := 0; i < s.cfg.Receivers; i++ {
		s.wg.Add(1)
		go s.receiver(ctx, calls)
	}
	s.log.Info("receiving", "queue_url", s.cfg.QueueURL, "receivers", s.cfg.Receivers)
	return nil
}

// closeGrace bounds how long Close lets the receivers' ReceiveMessage
// calls in flight end by themselves before it cancels them.
const closeGrace = 5 * time.Second

// Close stops the receivers and makes the messages they fetched but never
// handed out visible again at once, so another collector can take them.
// It first lets the long polls in flight end (at most closeGrace; they
// return at once when the queue holds messages, or after wait_time): a
// poll cancelled from this side may still be served by SQS, and a message
// it takes then (one Close has just released, say) reappears only after
// its visibility timeout. Nothing is lost either way. Delivered but
// unacknowledged messages reappear when their visibility timeout ends.
// Close is idempotent.
func (s *Source) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.done)
	stop, abort := s.stop, s.abort
	s.mu.Unlock()
	if stop != nil {
		stop()
		ended := make(chan struct{})
		go func() { s.wg.Wait(); close(ended) }()
		t := time.NewTimer(closeGrace)
		select {
		case <-ended:
		case <-t.C:
		}
		t.Stop()
		abort()
		<-ended
	}
	// Every poll has ended: none can take what is released now.
	s.mu.Lock()
	rest := s.pending
	s.pending = nil
	s.mu.Unlock()
	s.release(rest)
	return nil
}

func closedError(name string) error {
	return quarantine.Errorf(quarantine.ECONFLICT, "sqs: the source %s is closed", name)
}

// release makes hs visible again now, best effort.
func (s *Source) release(hs []held) {
	if len(hs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	receipts := make([]string, len(hs))
	for i, h := range hs {
		receipts[i] = deref(h.msg.ReceiptHandle)
	}
	if err := s.changeVisibility(ctx, receipts, 0); err != nil {
		s.log.Debug("could not release prefetched messages: they reappear after their visibility timeout", "err", err)
	}
}

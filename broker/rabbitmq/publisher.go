package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/broker/internal/publisher"
	"github.com/quarantine-dev/quarantine/internal/redacturl"
	"github.com/quarantine-dev/quarantine/replay"
)

var (
	_ replay.Publisher = (*Publisher)(nil)
	_ replay.Connector = (*Publisher)(nil)
)

// Publisher publishes replayed messages to RabbitMQ: through the default
// exchange, with the destination queue as routing key, mandatory, and
// persistent, on a channel in confirm mode.
//
// A Publish call writes every message of its slice, then waits for the
// broker's confirms (publisher confirms are pipelined, not one round trip
// per message). A message the broker returns (basic.return: no queue of
// that name) is ItemFailed, a nack is ItemFailed, a lost connection or
// channel makes every message not yet confirmed ItemPending; the next
// Publish dials again.
//
// Concurrent calls share the one channel: each writes its slice while no
// other writes, then waits for its confirms while the next call writes
// (so the broker always has a slice to confirm while the last one's
// confirms travel back). The calls take their answers one at a time, in
// the order they wrote, so that one reads the returns at a time: a
// return it reads for a later call's message is kept for that call.
type Publisher struct {
	cfg  Config
	name string
	log  *slog.Logger
	// dial opens the TCP connection; tests wrap it to cut the connection.
	dial func(network, addr string) (net.Conn, error)

	mu     sync.Mutex // the session, and writing on its channel
	sess   *pubSession
	closed bool
}

// pubSession is one connection and its confirm-mode channel.
type pubSession struct {
	conn    *amqp.Connection
	ch      *amqp.Channel
	returns chan amqp.Return
	// tail is closed once the call that wrote last has its answers: the
	// next call to write waits for it before it reads confirms and
	// returns. Guarded by Publisher.mu.
	tail chan struct{}
	// early holds the returns read by a call for messages of calls that
	// wrote after it, by message id and queue. Only the call whose turn
	// it is touches it.
	early map[returnKey]int
}

// returnKey names a returned message: its id and the queue it was for.
type returnKey struct{ id, queue string }

// NewPublisher returns a publisher to the broker at cfg.URL (cfg.Queue and
// the other collector keys are not used). It dials lazily, on the first
// Publish; name appears in the connection name ("quarantine publisher
// NAME") that rabbitmqctl list_connections shows.
func NewPublisher(cfg Config, name string, logger *slog.Logger) *Publisher {
	return &Publisher{cfg: cfg, name: name, dial: amqp.DefaultDial(dialTimeout),
		log: publisher.Log(logger, "rabbitmq", name)}
}

// Connect implements replay.Connector: it dials the broker and opens the
// confirm-mode channel unless it has them already.
func (p *Publisher) Connect(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, err := p.session()
	return err
}

// inflight is one written message waiting for its confirm.
type inflight struct {
	i int
	c *amqp.DeferredConfirmation
}

// Publish implements replay.Publisher. It returns one Result per message,
// in order. Errors in Results are *quarantine.Error values: ENOTFOUND for
// an unroutable message, EUNAVAILABLE for a nack or a broker that cannot
// be reached, or the context's error when ctx ends first (the connection
// is then closed, so that no answer for this call is left to another).
func (p *Publisher) Publish(ctx context.Context, msgs []replay.Outgoing) []replay.Result {
	res := make([]replay.Result, len(msgs))
	if len(msgs) == 0 {
		return res
	}
	p.mu.Lock()
	s, err := p.session()
	if err != nil {
		p.mu.Unlock()
		return allPending(res, err)
	}
	prev, mine := s.tail, make(chan struct{})
	s.tail = mine
	defer close(mine)
	sent := p.write(ctx, s, msgs, res)
	p.mu.Unlock()

	// Wait for the calls that wrote before this one to have their answers.
	select {
	case <-prev:
	default:
		select {
		case <-prev:
		case <-ctx.Done():
			p.lose(s, ctx.Err())
			<-prev // the closed connection answers them at once
		}
	}
	p.await(ctx, s, msgs, sent, res)
	return res
}

// write publishes msgs on s, filling res for those it could not write,
// and returns those it wrote. Guarded by p.mu.
func (p *Publisher) write(ctx context.Context, s *pubSession, msgs []replay.Outgoing, res []replay.Result) []inflight {
	sent := make([]inflight, 0, len(msgs))
	for i := range msgs {
		if err := checkFields(&msgs[i]); err != nil {
			res[i] = replay.Result{Outcome: quarantine.ItemFailed, Err: err}
			continue
		}
		c, err := s.ch.PublishWithDeferredConfirmWithContext(ctx, "", msgs[i].Queue, true, false, publishing(&msgs[i]))
		if err != nil {
			if ctx.Err() == nil {
				p.drop(s, err)
			}
			for j := i; j < len(msgs); j++ {
				res[j] = pending(ctx, err, "cannot publish to queue %s", word(msgs[j].Queue))
			}
			break
		}
		sent = append(sent, inflight{i, c})
	}
	return sent
}

// await waits for the confirms of sent and reads the returns meanwhile
// (this call's turn on s), filling res.
func (p *Publisher) await(ctx context.Context, s *pubSession, msgs []replay.Outgoing, sent []inflight, res []replay.Result) {
	byID := make(map[returnKey][]int, len(sent))
	for _, f := range sent {
		k := returnKey{msgs[f.i].MessageID, msgs[f.i].Queue}
		byID[k] = append(byID[k], f.i)
	}
	returned := make([]bool, len(msgs))
	onReturn := func(r amqp.Return) {
		k := returnKey{r.MessageId, r.RoutingKey}
		for _, i := range byID[k] {
			if !returned[i] {
				returned[i] = true
				return
			}
		}
		s.early[k]++ // a later call's message
	}
	// Returns an earlier call read for this one's messages.
	for k, is := range byID {
		for _, i := range is {
			if s.early[k] == 0 {
				break
			}
			returned[i] = true
			if s.early[k]--; s.early[k] == 0 {
				delete(s.early, k)
			}
		}
	}
	returns := s.returns
	lost := false
	confirmed := 0 // sent[:confirmed] have their answer
wait:
	for _, f := range sent {
		i := f.i
	one:
		for {
			select {
			case r, ok := <-returns:
				if !ok {
					returns = nil // the channel is closed: its confirms end too
					continue
				}
				onReturn(r)
			case <-f.c.Done():
				break one
			case <-ctx.Done():
				// Close the connection: the broker's answers for the
				// rest must not reach another call.
				p.lose(s, ctx.Err())
				for _, g := range sent[confirmed:] {
					res[g.i] = pending(ctx, ctx.Err(), "waiting for the broker's confirm")
				}
				break wait
			}
		}
		confirmed++
		if f.c.Acked() {
			res[i] = replay.Result{Outcome: quarantine.ItemPublished}
			continue
		}
		// A lost channel nacks every outstanding confirmation: that is
		// not the broker's refusal.
		if s.ch.IsClosed() {
			if !lost {
				lost = true
				p.lose(s, amqp.ErrClosed)
			}
			res[i] = pending(ctx, amqp.ErrClosed, "the connection was lost before the broker confirmed the message for queue %s", word(msgs[i].Queue))
			continue
		}
		// A nack: the broker refused the message for now (a full queue
		// with x-overflow reject-publish, an internal error): the engine
		// offers it again, a bounded number of times.
		res[i] = replay.Result{Outcome: quarantine.ItemPending, Refused: true, Err: &quarantine.Error{Code: quarantine.EUNAVAILABLE,
			Message: fmt.Sprintf("rabbitmq: the broker refused (nacked) the message for queue %s", word(msgs[i].Queue))}}
	}
	// basic.return precedes the basic.ack of the same message, and the
	// client hands it over before it handles the ack: every return of a
	// confirmed message is received or buffered by now.
	drainReturns(returns, onReturn)
	for _, f := range sent[:confirmed] {
		if returned[f.i] {
			res[f.i] = replay.Result{Outcome: quarantine.ItemFailed, Err: &quarantine.Error{Code: quarantine.ENOTFOUND,
				Message: fmt.Sprintf("rabbitmq: no queue named %s: the message was unroutable", word(msgs[f.i].Queue))}}
		}
	}
}

// checkFields refuses the fields of o that AMQP cannot carry.
func checkFields(o *replay.Outgoing) error {
	return checkShort(o.Headers, [2]string{"the queue name", o.Queue}, [2]string{"the message id", o.MessageID},
		[2]string{"the content type", o.ContentType}, [2]string{"the job name", o.JobName})
}

// publishing maps an Outgoing onto the AMQP properties.
func publishing(o *replay.Outgoing) amqp.Publishing {
	h := make(amqp.Table, len(o.Headers)+1)
	for k, v := range o.Headers {
		h[k] = v
	}
	if _, ok := h[replay.HeaderIdempotencyKey]; !ok && o.IdempotencyKey != "" {
		h[replay.HeaderIdempotencyKey] = o.IdempotencyKey
	}
	return persistent(h, o.ContentType, o.MessageID, o.JobName, now(), o.Payload)
}

// session returns the live session, dialling one when there is none or
// the last one was lost. Guarded by p.mu.
func (p *Publisher) session() (*pubSession, error) {
	if p.closed {
		return nil, quarantine.Errorf(quarantine.EUNAVAILABLE, "rabbitmq: the publisher is closed")
	}
	if s := p.sess; s != nil {
		if !s.conn.IsClosed() && !s.ch.IsClosed() {
			return s, nil
		}
		p.drop(s, amqp.ErrClosed)
	}
	conn, err := connect(p.cfg.URL, "quarantine publisher "+p.name, p.dial)
	if err != nil {
		return nil, err
	}
	ch, err := confirmChannel(conn, "a channel")
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	// Returns are read while confirms are awaited; the buffer only has to
	// absorb those that arrive between two reads.
	s := &pubSession{conn: conn, ch: ch, returns: ch.NotifyReturn(make(chan amqp.Return, 256)),
		tail: make(chan struct{}), early: map[returnKey]int{}}
	close(s.tail)
	p.sess = s
	p.log.Info("connected to RabbitMQ", "url", redacturl.URL(p.cfg.URL))
	return s, nil
}

// drop forgets s (closing its connection) after a failure. Guarded by p.mu.
func (p *Publisher) drop(s *pubSession, cause error) {
	forget(&p.sess, s, p.log, cause, "publish")
}

// lose is drop for a call that does not hold p.mu.
func (p *Publisher) lose(s *pubSession, cause error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drop(s, cause)
}

// Close closes the connection. Publish fails (pending) afterwards.
func (p *Publisher) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.sess == nil {
		return nil
	}
	s := p.sess
	p.sess = nil
	if err := s.conn.Close(); err != nil && !errors.Is(err, amqp.ErrClosed) {
		return err
	}
	return nil
}

// drainReturns hands every buffered return to f (nil: discard them).
func drainReturns(c <-chan amqp.Return, f func(amqp.Return)) {
	for {
		select {
		case r, ok := <-c:
			if !ok {
				return
			}
			if f != nil {
				f(r)
			}
		default:
			return
		}
	}
}

// pending is an ItemPending result: the context's error when it ended,
// else an EUNAVAILABLE error wrapping err.
func pending(ctx context.Context, err error, format string, args ...any) replay.Result {
	if ctx.Err() != nil {
		err = ctx.Err()
	}
	return replay.Result{Outcome: quarantine.ItemPending, Err: unavailable(err, format, args...)}
}

func allPending(res []replay.Result, err error) []replay.Result {
	for i := range res {
		res[i] = replay.Result{Outcome: quarantine.ItemPending, Err: err}
	}
	return res
}

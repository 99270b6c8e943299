package rabbitmq

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/quarantine-dev/quarantine"
)

// dialTimeout bounds the TCP connect and the AMQP handshake.
const dialTimeout = 10 * time.Second

// session is one connection, its channel and its consumer. Delivery tags
// are only meaningful on the channel that issued them, so each delivery's
// handle points at its session, and a session that is gone is never used
// again: its deliveries cannot be acknowledged.
type session struct {
	conn       *amqp.Connection
	ch         *amqp.Channel
	deliveries <-chan amqp.Delivery
	closed     chan *amqp.Error // the channel's NotifyClose
	prefetch   int

	// Guarded by Source.mu.
	dead bool
	// outstanding holds, in increasing order, every tag taken from
	// deliveries and not yet acknowledged, so that a multiple ack never
	// covers a delivery the collector has not committed.
	outstanding []uint64
	// multiAcks and singleAcks count the basic.ack frames of each kind.
	multiAcks, singleAcks int
}

// handle is a collect.Delivery's Handle: the tag and its channel.
type handle struct {
	sess *session
	tag  uint64
}

// dial opens a connection, a channel with the prefetch, checks (or
// declares) the queue and starts the consumer.
func dial(cfg Config, name string, prefetch int) (*session, error) {
	conn, err := connect(cfg.URL, "quarantine collector "+name, amqp.DefaultDial(dialTimeout))
	if err != nil {
		return nil, err
	}
	s := &session{conn: conn, prefetch: prefetch}
	if err := s.open(cfg, name); err != nil {
		_ = conn.Close()
		return nil, err
	}
	return s, nil
}

func (s *session) open(cfg Config, name string) error {
	ch, err := s.conn.Channel()
	if err != nil {
		return unavailable(err, "cannot open a channel")
	}
	if _, err := ch.QueueDeclarePassive(cfg.Queue, false, false, false, false, nil); err != nil {
		if !isNotFound(err) {
			return unavailable(err, "cannot check queue %s", word(cfg.Queue))
		}
		if !cfg.Declare {
			return &quarantine.Error{Code: quarantine.EUNAVAILABLE, Field: "queue", Err: err, Message: fmt.Sprintf(
				"queue %s does not exist on the broker: create it (or set declare: true to have the collector create a durable classic queue)", word(cfg.Queue))}
		}
		// A failed passive declare closes the channel: open another.
		if ch, err = s.conn.Channel(); err != nil {
			return unavailable(err, "cannot open a channel")
		}
		if _, err := ch.QueueDeclare(cfg.Queue, true, false, false, false, nil); err != nil {
			return unavailable(err, "cannot declare queue %s", word(cfg.Queue))
		}
	}
	if err := ch.Qos(s.prefetch, 0, false); err != nil {
		return unavailable(err, "cannot set the prefetch to %d", s.prefetch)
	}
	s.closed = ch.NotifyClose(make(chan *amqp.Error, 1))
	s.deliveries, err = ch.Consume(cfg.Queue, consumerTag(name), false, false, false, false, nil)
	if err != nil {
		return unavailable(err, "cannot consume from queue %s", word(cfg.Queue))
	}
	s.ch = ch
	return nil
}

// track records tags handed out, in the order the channel delivered them.
func (s *session) track(tag uint64) { s.outstanding = append(s.outstanding, tag) }

// ack acknowledges tags (sorted, unique, all outstanding): one multiple ack
// when the batch holds every outstanding tag up to its highest, else one
// ack each. AMQP 0-9-1 does not confirm acks: this returns once the frames
// are written. An ack the broker refuses closes the channel, which the next
// Receive reports; the broker then redelivers, and the dedupe key absorbs
// it. (A synchronous basic.qos after each ack, to learn that the channel
// processed it, cost up to a third of the drain time under load.)
func (s *session) ack(tags []uint64) error {
	top := tags[len(tags)-1]
	below, _ := slices.BinarySearch(s.outstanding, top+1) // outstanding tags <= top
	var err error
	if below == len(tags) {
		err = s.ch.Ack(top, true)
		s.multiAcks++
	} else {
		for _, t := range tags {
			if err = s.ch.Ack(t, false); err != nil {
				break
			}
			s.singleAcks++
		}
	}
	if err != nil {
		return err // the channel is gone, and its tags with it
	}
	s.outstanding = slices.DeleteFunc(s.outstanding, func(t uint64) bool {
		_, found := slices.BinarySearch(tags, t)
		return found
	})
	return nil
}

// has reports whether tag is outstanding.
func (s *session) has(tag uint64) bool {
	_, found := slices.BinarySearch(s.outstanding, tag)
	return found
}

func (s *session) close() error {
	err := s.conn.Close()
	if errors.Is(err, amqp.ErrClosed) {
		return nil
	}
	return err
}

// consumerTag names the consumer in the management UI and rabbitmqctl.
func consumerTag(name string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	if len(name) > 200 {
		name = name[:200]
	}
	return "quarantine-" + name + "-" + hex.EncodeToString(b)
}

func isNotFound(err error) bool {
	var ae *amqp.Error
	return errors.As(err, &ae) && ae.Code == amqp.NotFound
}

// unavailable wraps a broker error. amqp091's errors never carry the URL.
func unavailable(err error, format string, args ...any) *quarantine.Error {
	return &quarantine.Error{Code: quarantine.EUNAVAILABLE, Message: "rabbitmq: " + fmt.Sprintf(format, args...), Err: err}
}

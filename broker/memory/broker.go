package memory

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/replay"
)

// Message is one message a queue holds, with the time it arrived.
type Message struct {
	replay.Outgoing
	At time.Time
}

// Broker holds queues. Publishing to a queue that was not declared is
// refused as unroutable, as RabbitMQ's default exchange does with
// mandatory set. The zero value is not usable: call New.
type Broker struct {
	mu     sync.Mutex
	queues map[string][]Message
	down   bool
	refuse map[string]int // queue -> messages still to refuse (Refuse)
	notify chan struct{}  // closed and replaced at every publish
	// Hook, when set, is called (outside the lock) with every message
	// published, after it was stored.
	hook func(Message)
}

var _ replay.Publisher = (*Broker)(nil)

// New returns a broker with the queues declared.
func New(queues ...string) *Broker {
	b := &Broker{queues: map[string][]Message{}, notify: make(chan struct{})}
	for _, q := range queues {
		b.queues[q] = nil
	}
	return b
}

// Declare creates queue (a no-op when it exists).
func (b *Broker) Declare(queue string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.queues[queue]; !ok {
		b.queues[queue] = nil
	}
}

// SetDown makes Publish fail as a broker that cannot be reached does
// (every message pending), until SetDown(false).
func (b *Broker) SetDown(down bool) {
	b.mu.Lock()
	b.down = down
	b.mu.Unlock()
}

// Refuse makes the broker refuse the next n messages published to queue
// for now, as a RabbitMQ nack or a full queue does (pending, Refused). A
// negative n refuses every one until Refuse(queue, 0).
func (b *Broker) Refuse(queue string, n int) {
	b.mu.Lock()
	if b.refuse == nil {
		b.refuse = map[string]int{}
	}
	b.refuse[queue] = n
	b.mu.Unlock()
}

// OnPublish sets a function called with every message published.
func (b *Broker) OnPublish(f func(Message)) {
	b.mu.Lock()
	b.hook = f
	b.mu.Unlock()
}

// Publish implements replay.Publisher.
func (b *Broker) Publish(ctx context.Context, msgs []replay.Outgoing) []replay.Result {
	res := make([]replay.Result, len(msgs))
	var published []Message
	b.mu.Lock()
	hook := b.hook
	for i, m := range msgs {
		switch _, ok := b.queues[m.Queue]; {
		case ctx.Err() != nil:
			res[i] = replay.Result{Outcome: quarantine.ItemPending, Err: ctx.Err()}
		case b.down:
			res[i] = replay.Result{Outcome: quarantine.ItemPending, Err: fmt.Errorf("memory broker is down")}
		case !ok:
			res[i] = replay.Result{Outcome: quarantine.ItemFailed, Err: fmt.Errorf("no queue named %q: the message was unroutable", m.Queue)}
		case b.refuse[m.Queue] != 0:
			if b.refuse[m.Queue] > 0 {
				b.refuse[m.Queue]--
			}
			res[i] = replay.Result{Outcome: quarantine.ItemPending, Refused: true, Err: fmt.Errorf("memory broker: queue %q refused the message (full)", m.Queue)}
		default:
			msg := Message{Outgoing: m, At: time.Now()}
			b.queues[m.Queue] = append(b.queues[m.Queue], msg)
			published = append(published, msg)
			res[i] = replay.Result{Outcome: quarantine.ItemPublished}
		}
	}
	if len(published) > 0 {
		close(b.notify)
		b.notify = make(chan struct{})
	}
	b.mu.Unlock()
	if hook != nil {
		for _, m := range published {
			hook(m)
		}
	}
	return res
}

// Messages returns a copy of what queue holds, oldest first.
func (b *Broker) Messages(queue string) []Message {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]Message(nil), b.queues[queue]...)
}

// Wait blocks until queue holds at least n messages, or ctx ends.
func (b *Broker) Wait(ctx context.Context, queue string, n int) ([]Message, error) {
	for {
		b.mu.Lock()
		got, ch := len(b.queues[queue]), b.notify
		b.mu.Unlock()
		if got >= n {
			return b.Messages(queue), nil
		}
		select {
		case <-ctx.Done():
			return b.Messages(queue), fmt.Errorf("queue %s holds %d messages, not %d: %w", queue, got, n, ctx.Err())
		case <-ch:
		}
	}
}

// Close implements replay.Publisher.
func (b *Broker) Close() error { return nil }

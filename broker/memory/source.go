package memory

import (
	"context"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
)

// Source is a collector source on one queue of a Broker holding failure
// envelopes (a WorkQueue's failure queue, with WorkQueueOptions.Broker):
// it reads the queue from an offset, as a stream, since a Broker keeps
// every message. What a Source handed out is not handed out again; an
// unacknowledged delivery is lost with the process, like everything in
// memory.
type Source struct {
	b     *Broker
	queue string
	name  string
	next  int // the offset of the next message to hand out
}

var _ collect.Source = (*Source)(nil)

// NewSource returns a source named name (the collector's) on queue of b.
func NewSource(b *Broker, queue, name string) *Source {
	b.Declare(queue)
	return &Source{b: b, queue: queue, name: name}
}

// Receive implements collect.Source: each message's body is decoded as
// a failure envelope (kept raw and flagged when it is not one).
func (s *Source) Receive(ctx context.Context, max int, linger time.Duration) ([]collect.Delivery, error) {
	if _, err := s.b.Wait(ctx, s.queue, s.next+1); err != nil {
		return nil, ctx.Err()
	}
	if linger > 0 {
		t := time.NewTimer(linger)
		wctx, cancel := context.WithCancel(ctx)
		go func() {
			select {
			case <-t.C:
				cancel()
			case <-wctx.Done():
			}
		}()
		_, _ = s.b.Wait(wctx, s.queue, s.next+max)
		cancel()
		t.Stop()
	}
	msgs := s.b.Messages(s.queue)
	end := min(len(msgs), s.next+max)
	out := make([]collect.Delivery, 0, end-s.next)
	for _, m := range msgs[s.next:end] {
		msg, _ := collect.DecodeEnvelope(m.Payload, collect.Origin{Source: s.name, Kind: quarantine.SourceMemory})
		if msg.Queue == "" {
			msg.Queue = s.queue
		}
		out = append(out, collect.Delivery{Message: msg, Handle: m.MessageID})
	}
	s.next = end
	return out, nil
}

// Ack implements collect.Source: the messages stay on the broker (it
// keeps everything); the offset moved when they were received.
func (s *Source) Ack(context.Context, []collect.Delivery) error { return nil }

// Close implements collect.Source.
func (s *Source) Close() error { return nil }

package nats

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarantine-dev/quarantine/collect"
)

// fetch pulls up to limit messages from l.cons.
//
// It first takes what is available at once. When nothing is, it waits for
// one message with pull requests of at most s.poll each (until ctx ends,
// or until the time until, when set, passes: then it returns nothing and
// no error). Once it holds a message, it waits at most linger for up to
// limit in all.
//
// Every pull request is read until the server ends it, so that no message
// is delivered to a request nobody reads; when ctx ends during a wait, the
// request is abandoned to a goroutine that returns late arrivals to the
// stream (nak).
func (s *Source) fetch(ctx context.Context, l *link, limit int, linger time.Duration, until time.Time) ([]jetstream.Msg, error) {
	msgs, err := s.pull(ctx, l, limit, 0)
	if err != nil || len(msgs) > 0 {
		return s.more(ctx, l, msgs, limit, linger, err)
	}
	for {
		wait := s.poll
		if dl, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(dl))
		}
		if !until.IsZero() {
			wait = min(wait, time.Until(until))
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if wait < time.Millisecond {
			return nil, nil
		}
		if err := waitConnected(ctx, l.nc, 2*s.poll); err != nil {
			return nil, err
		}
		msgs, err := s.pull(ctx, l, 1, wait)
		if err != nil || len(msgs) > 0 {
			return s.more(ctx, l, msgs, limit, linger, err)
		}
	}
}

// more completes a batch that holds msgs: what arrives within linger, or
// what is available at once when linger is 0.
func (s *Source) more(ctx context.Context, l *link, msgs []jetstream.Msg, limit int, linger time.Duration, err error) ([]jetstream.Msg, error) {
	if err != nil || len(msgs) >= limit || ctx.Err() != nil {
		return msgs, err
	}
	next, err := s.pull(ctx, l, limit-len(msgs), linger)
	return append(msgs, next...), err
}

// pull sends one pull request for up to n messages and reads it to its
// end: wait 0 asks only for what is available now.
func (s *Source) pull(ctx context.Context, l *link, n int, wait time.Duration) ([]jetstream.Msg, error) {
	var (
		b   jetstream.MessageBatch
		err error
	)
	if wait <= 0 {
		b, err = l.cons.FetchNoWait(n)
	} else {
		b, err = l.cons.Fetch(n, jetstream.FetchMaxWait(wait))
	}
	if err != nil {
		l.ready.Store(false) // set up again: the consumer may be gone
		return nil, unavailable(err, "nats: pull from consumer %q failed", s.cfg.Consumer)
	}
	out := make([]jetstream.Msg, 0, n)
	ch := b.Messages()
	for {
		select {
		case m, ok := <-ch:
			if !ok {
				if err := b.Error(); err != nil {
					l.ready.Store(false)
					return out, unavailable(err, "nats: pull from consumer %q failed", s.cfg.Consumer)
				}
				return out, nil
			}
			out = append(out, m)
		case <-ctx.Done():
			go nakLate(ch)
			return out, ctx.Err()
		}
	}
}

// nakLate returns to the stream whatever still arrives on an abandoned
// pull request, so that it is redelivered at once rather than after
// AckWait.
func nakLate(ch <-chan jetstream.Msg) {
	for m := range ch {
		_ = m.Nak()
	}
}

// receiveFailures is Receive in mode (a).
func (s *Source) receiveFailures(ctx context.Context, l *link, limit int, linger time.Duration) ([]collect.Delivery, error) {
	msgs, err := s.fetch(ctx, l, limit, linger, time.Time{})
	ds := make([]collect.Delivery, 0, len(msgs))
	for _, m := range msgs {
		ds = append(ds, collect.Delivery{Message: decodeFailure(s.name, toStreamMsg(m)), Handle: handle{msg: m}})
	}
	return ds, err
}

// toStreamMsg reads a delivered message with its stream metadata.
func toStreamMsg(m jetstream.Msg) streamMsg {
	sm := streamMsg{Subject: m.Subject(), Header: m.Headers(), Data: m.Data()}
	if md, err := m.Metadata(); err == nil {
		sm.Stream, sm.Seq, sm.Time = md.Stream, md.Sequence.Stream, md.Timestamp.UTC()
	}
	return sm
}

// fromRaw reads a message fetched by sequence.
func fromRaw(stream string, r *jetstream.RawStreamMsg) streamMsg {
	return streamMsg{Stream: stream, Seq: r.Sequence, Time: r.Time.UTC(), Subject: r.Subject, Header: r.Header, Data: r.Data}
}

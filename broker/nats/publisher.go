package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/broker/internal/publisher"
	"github.com/quarantine-dev/quarantine/internal/redacturl"
	"github.com/quarantine-dev/quarantine/replay"
)

var _ replay.Publisher = (*Publisher)(nil)

// pubAckTimeout bounds the wait for one message's PubAck.
const pubAckTimeout = 10 * time.Second

// Publisher publishes replayed messages to JetStream: each Outgoing to the
// subject Outgoing.Queue, with Nats-Msg-Id = Outgoing.MessageID so that a
// stream's duplicate window drops a republish of the same item.
//
// A Publish call publishes its whole slice asynchronously, then waits for
// every PubAck. A PubAck marked duplicate is ItemDeduplicated; a subject no
// stream captures (no responders) or an error the stream answers is
// ItemFailed; a timeout, a lost connection or the context's end is
// ItemPending. It is safe for concurrent use.
type Publisher struct {
	cfg  Config
	name string
	log  *slog.Logger

	mu     sync.Mutex
	nc     *nats.Conn
	js     jetstream.JetStream
	closed bool
}

// NewPublisher returns a publisher to the server(s) of cfg.URL (the other
// keys of the collector's Config are not used). It dials lazily, on the
// first Publish; the client then reconnects by itself. name appears in the
// connection name ("quarantine publisher NAME").
func NewPublisher(cfg Config, name string, logger *slog.Logger) *Publisher {
	return &Publisher{cfg: cfg, name: name, log: publisher.Log(logger, "nats", name)}
}

// Publish implements replay.Publisher. Errors in Results are
// *quarantine.Error values: ENOTFOUND when no stream captures the subject,
// EINVALID for another refusal by the stream, EUNAVAILABLE for a timeout or
// a server that cannot be reached, or the context's error.
func (p *Publisher) Publish(ctx context.Context, msgs []replay.Outgoing) []replay.Result {
	res := make([]replay.Result, len(msgs))
	if len(msgs) == 0 {
		return res
	}
	js, err := p.connect()
	if err != nil {
		for i := range res {
			res[i] = replay.Result{Outcome: quarantine.ItemPending, Err: err}
		}
		return res
	}
	futures := make([]jetstream.PubAckFuture, len(msgs))
	for i := range msgs {
		if ctx.Err() != nil {
			res[i] = p.pending(ctx, ctx.Err(), msgs[i].Queue)
			continue
		}
		f, err := js.PublishMsgAsync(message(&msgs[i]))
		if err != nil {
			res[i] = p.outcome(ctx, err, msgs[i].Queue)
			continue
		}
		futures[i] = f
	}
	// The client's own ack timeout (pubAckTimeout) resolves every future;
	// this one only guards against a future that is never resolved.
	timeout := time.NewTimer(pubAckTimeout + 5*time.Second)
	defer timeout.Stop()
	expired := false
	for i, f := range futures {
		if f == nil {
			continue
		}
		if expired {
			select {
			case ack := <-f.Ok():
				res[i] = acked(ack)
			case err := <-f.Err():
				res[i] = p.outcome(ctx, err, msgs[i].Queue)
			default:
				res[i] = p.pending(ctx, jetstream.ErrAsyncPublishTimeout, msgs[i].Queue)
			}
			continue
		}
		select {
		case ack := <-f.Ok():
			res[i] = acked(ack)
		case err := <-f.Err():
			res[i] = p.outcome(ctx, err, msgs[i].Queue)
		case <-ctx.Done():
			res[i] = p.pending(ctx, ctx.Err(), msgs[i].Queue)
		case <-timeout.C:
			res[i] = p.pending(ctx, jetstream.ErrAsyncPublishTimeout, msgs[i].Queue)
			expired = true
		}
	}
	return res
}

func acked(ack *jetstream.PubAck) replay.Result {
	if ack.Duplicate {
		return replay.Result{Outcome: quarantine.ItemDeduplicated}
	}
	return replay.Result{Outcome: quarantine.ItemPublished}
}

// message maps an Outgoing onto a NATS message: the headers as they are,
// Content-Type, the idempotency key when the headers lack it, and
// Nats-Msg-Id.
func message(o *replay.Outgoing) *nats.Msg {
	h := make(nats.Header, len(o.Headers)+3)
	for k, v := range o.Headers {
		h[k] = []string{v} // as written: NATS header names are case-sensitive
	}
	if o.ContentType != "" {
		h["Content-Type"] = []string{o.ContentType}
	}
	if _, ok := h[replay.HeaderIdempotencyKey]; !ok && o.IdempotencyKey != "" {
		h[replay.HeaderIdempotencyKey] = []string{o.IdempotencyKey}
	}
	if o.MessageID != "" {
		h[nats.MsgIdHdr] = []string{o.MessageID}
	}
	return &nats.Msg{Subject: o.Queue, Data: o.Payload, Header: h}
}

// outcome classifies a publish error.
func (p *Publisher) outcome(ctx context.Context, err error, subject string) replay.Result {
	var ae *jetstream.APIError
	switch {
	case ctx.Err() != nil:
		return p.pending(ctx, ctx.Err(), subject)
	case errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, nats.ErrNoResponders):
		return replay.Result{Outcome: quarantine.ItemFailed, Err: &quarantine.Error{Code: quarantine.ENOTFOUND, Err: err,
			Message: fmt.Sprintf("nats: no stream captures subject %q", quarantine.Clip(subject))}}
	case errors.Is(err, nats.ErrBadSubject), errors.Is(err, nats.ErrMaxPayload):
		return replay.Result{Outcome: quarantine.ItemFailed, Err: &quarantine.Error{Code: quarantine.EINVALID, Err: err,
			Message: fmt.Sprintf("nats: the server refused the message for subject %q: %v", quarantine.Clip(subject), err)}}
	case errors.As(err, &ae) && ae.Code != 503:
		return replay.Result{Outcome: quarantine.ItemFailed, Err: &quarantine.Error{Code: quarantine.EINVALID, Err: err,
			Message: fmt.Sprintf("nats: the stream refused the message for subject %q: %s", quarantine.Clip(subject), quarantine.Clip(ae.Description))}}
	case errors.As(err, &ae):
		// 503: the stream answered that it cannot take the message now
		// (full, with discard new; no quorum): offered again, a bounded
		// number of times. A timeout or a lost connection spends no
		// attempt: the item waits for the server.
		r := p.pending(ctx, err, subject)
		r.Refused = true
		return r
	}
	return p.pending(ctx, err, subject)
}

func (p *Publisher) pending(ctx context.Context, err error, subject string) replay.Result {
	if ctx.Err() != nil {
		err = ctx.Err()
	}
	return replay.Result{Outcome: quarantine.ItemPending, Err: &quarantine.Error{Code: quarantine.EUNAVAILABLE, Err: err,
		Message: fmt.Sprintf("nats: the message for subject %q was not confirmed", quarantine.Clip(subject))}}
}

// connect returns the JetStream context, dialling first when there is no
// connection (or it was closed). A connection that is reconnecting is
// reported unavailable rather than waited for.
func (p *Publisher) connect() (jetstream.JetStream, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, quarantine.Errorf(quarantine.EUNAVAILABLE, "nats: the publisher is closed")
	}
	if p.nc != nil && p.nc.IsClosed() {
		p.nc, p.js = nil, nil
	}
	if p.nc == nil {
		log := p.log
		nc, js, err := connectJetStream(p.cfg.URL, "quarantine publisher "+p.name, log,
			jetstream.WithPublishAsyncTimeout(pubAckTimeout), jetstream.WithPublishAsyncMaxPending(4096))
		if err != nil {
			return nil, err
		}
		p.nc, p.js = nc, js
		log.Info("connected to NATS", "url", redacturl.List(p.cfg.URL))
	}
	if !p.nc.IsConnected() {
		return nil, quarantine.Errorf(quarantine.EUNAVAILABLE, "nats: not connected (reconnecting)")
	}
	return p.js, nil
}

// Close closes the connection. Publish fails (pending) afterwards.
func (p *Publisher) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.nc != nil {
		p.nc.Close()
		p.nc, p.js = nil, nil
	}
	return nil
}

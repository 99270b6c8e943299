package pubsub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	ps "cloud.google.com/go/pubsub/v2"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/broker/internal/publisher"
	"github.com/quarantine-dev/quarantine/broker/internal/refusal"
	"github.com/quarantine-dev/quarantine/collect"
	"github.com/quarantine-dev/quarantine/replay"
)

var _ replay.Publisher = (*Publisher)(nil)

// publishTimeout bounds one publish, the client's retries included; after
// it the item is pending.
const publishTimeout = 30 * time.Second

// HeaderContentType carries the content type of a replayed message.
const HeaderContentType = "content-type"

// Publisher publishes replayed messages to Pub/Sub topics: each Outgoing
// to the topic Outgoing.Queue (a topic ID in Config.Project, or
// projects/P/topics/T), with the original ordering key
// (x-pubsub-ordering-key), so that per-key order holds on an ordered
// subscription, and the headers as attributes less the dead-letter
// bookkeeping (CloudPubSubDeadLetterSource*, x-pubsub-*), plus
// content-type.
//
// A topic that does not exist fails the item (ENOTFOUND); an invalid
// message (too large, too many or too long attributes) or a permission
// denied fails it too (EINVALID). The service answering that it cannot
// take the message now (resource exhausted, aborted, internal) is
// ItemPending and Refused; an unreachable service, a timeout or the
// context's end is ItemPending. Safe for concurrent use.
type Publisher struct {
	cfg  Config
	name string
	log  *slog.Logger

	// timeout bounds one publish (publishTimeout).
	timeout time.Duration
	// answered counts Publish calls the service answered with a refusal
	// for now: a message that timed out while it grew was refused, not
	// stranded by an unreachable service.
	answered refusal.Counter

	mu     sync.Mutex
	cl     *ps.Client
	topics map[string]*ps.Publisher
	closed bool
}

// countRefusals is a gRPC interceptor that counts the Publish calls the
// service refused for now (the client retries those until its timeout).
func (p *Publisher) countRefusals(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if strings.HasSuffix(method, "/Publish") {
		switch status.Code(err) {
		case codes.ResourceExhausted, codes.Aborted, codes.Internal, codes.Unknown:
			p.answered.Add()
		}
	}
	return err
}

// NewPublisher returns a publisher to cfg's project (only its project,
// endpoint and credentials are used). It dials lazily, on the first
// Publish. Errors are EINVALID for a configuration that is not valid.
func NewPublisher(cfg Config, name string, logger *slog.Logger) (*Publisher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Publisher{cfg: cfg, name: name, topics: map[string]*ps.Publisher{}, timeout: publishTimeout,
		log: publisher.Log(logger, "pubsub", name)}, nil
}

// topic returns the publisher of the topic named full.
func (p *Publisher) topic(full string) (*ps.Publisher, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, quarantine.Errorf(quarantine.EUNAVAILABLE, "pubsub: the publisher is closed")
	}
	if t := p.topics[full]; t != nil {
		return t, nil
	}
	if p.cl == nil {
		cl, err := p.cfg.newClient(option.WithGRPCDialOption(grpc.WithChainUnaryInterceptor(p.countRefusals)))
		if err != nil {
			return nil, err
		}
		p.cl = cl
	}
	t := newTopicPublisher(p.cl, full)
	t.PublishSettings.Timeout = p.timeout
	p.topics[full] = t
	return t, nil
}

// newTopicPublisher is a publisher of topic that sends each message at
// once and keeps ordering keys.
func newTopicPublisher(cl *ps.Client, topic string) *ps.Publisher {
	t := cl.Publisher(topic)
	t.EnableMessageOrdering = true
	t.PublishSettings.DelayThreshold = time.Millisecond
	t.PublishSettings.Timeout = publishTimeout
	return t
}

// Publish implements replay.Publisher.
func (p *Publisher) Publish(ctx context.Context, msgs []replay.Outgoing) []replay.Result {
	res := make([]replay.Result, len(msgs))
	mark := p.answered.Mark()
	results := make([]*ps.PublishResult, len(msgs))
	pubs := make([]*ps.Publisher, len(msgs))
	for i := range msgs {
		full, err := destination(p.cfg.Project, msgs[i].Queue)
		if err != nil {
			res[i] = replay.Result{Outcome: quarantine.ItemFailed, Err: err}
			continue
		}
		t, err := p.topic(full)
		if err != nil {
			res[i] = replay.Result{Outcome: quarantine.ItemPending, Err: err}
			continue
		}
		pubs[i] = t
		results[i] = t.Publish(ctx, toMessage(&msgs[i]))
	}
	for i, r := range results {
		if r == nil {
			continue
		}
		_, err := r.Get(ctx)
		res[i] = outcome(ctx, err, msgs[i].Queue)
		if err != nil {
			if k := msgs[i].Headers[HeaderOrderingKey]; k != "" {
				pubs[i].ResumePublish(k) // a failure pauses the key: the next try must go
			}
		}
	}
	// The client retries refusals itself, and reports only that time ran
	// out: the service answered meanwhile.
	p.answered.Refused(ctx, mark, res, func(e error) bool {
		return status.Code(e) == codes.DeadlineExceeded || errors.Is(e, context.DeadlineExceeded)
	})
	return res
}

// destination is queue as a full topic name.
func destination(project, queue string) (string, error) {
	if _, _, err := split(queue, "topics"); err != nil {
		return "", quarantine.Errorf(quarantine.EINVALID, "pubsub: the destination topic: %s", err)
	}
	return fullName(project, "topics", queue), nil
}

// toMessage maps an Outgoing onto a Pub/Sub message: the payload as data,
// the ordering key, the headers less the bookkeeping as attributes, the
// content type.
func toMessage(o *replay.Outgoing) *ps.Message {
	m := &ps.Message{Data: o.Payload, Attributes: make(map[string]string, len(o.Headers)+2)}
	names, hasCT := publisher.Headers(o, func(k, v string) bool {
		if k == HeaderOrderingKey {
			m.OrderingKey = v
			return true
		}
		return Bookkeeping(k)
	})
	for _, k := range names {
		m.Attributes[k] = o.Headers[k]
	}
	if !hasCT && o.ContentType != "" {
		m.Attributes[HeaderContentType] = o.ContentType
	}
	if o.IdempotencyKey != "" && collect.HeaderValue(m.Attributes, replay.HeaderIdempotencyKey) == "" {
		m.Attributes[replay.HeaderIdempotencyKey] = o.IdempotencyKey
	}
	return m
}

// outcome classifies a publish result.
func outcome(ctx context.Context, err error, topic string) replay.Result {
	if err == nil {
		return replay.Result{Outcome: quarantine.ItemPublished}
	}
	failed := func(code, what string) replay.Result {
		return replay.Result{Outcome: quarantine.ItemFailed, Err: &quarantine.Error{Code: code, Err: err,
			Message: fmt.Sprintf("pubsub: %s %q: %v", what, quarantine.Clip(topic), err)}}
	}
	if errors.Is(err, ps.ErrOversizedMessage) {
		return failed(quarantine.EINVALID, "the message is too large for topic")
	}
	r := replay.Result{Outcome: quarantine.ItemPending}
	switch status.Code(err) {
	case codes.NotFound:
		return failed(quarantine.ENOTFOUND, "no such topic")
	case codes.InvalidArgument, codes.PermissionDenied, codes.FailedPrecondition, codes.Unauthenticated, codes.OutOfRange:
		return failed(quarantine.EINVALID, "the service refused the message for topic")
	case codes.ResourceExhausted, codes.Aborted, codes.Internal:
		r.Refused = true // it answered, and cannot take it now
	}
	if ctx.Err() != nil {
		err = ctx.Err()
	}
	r.Err = &quarantine.Error{Code: quarantine.EUNAVAILABLE, Err: err,
		Message: fmt.Sprintf("pubsub: the message for topic %q was not confirmed: %v", quarantine.Clip(topic), err)}
	return r
}

// Close stops the topic publishers (sending what they hold) and closes
// the client. Publish fails (pending) afterwards.
func (p *Publisher) Close() error {
	p.mu.Lock()
	p.closed = true
	topics, cl := p.topics, p.cl
	p.topics, p.cl = map[string]*ps.Publisher{}, nil
	p.mu.Unlock()
	for _, t := range topics {
		t.Stop()
	}
	if cl != nil {
		return cl.Close()
	}
	return nil
}

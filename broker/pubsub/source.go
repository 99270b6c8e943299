package pubsub

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	ps "cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
)

var (
	_ collect.Source   = (*Source)(nil)
	_ collect.Windowed = (*Source)(nil)
)

// maxBatch caps one Receive.
const maxBatch = 10000

// lookupRetry is how long a failed lookup of a source subscription's
// topic is remembered before it is tried again.
const lookupRetry = time.Minute

// Source drains a subscription on a dead-letter topic for the collector
// loop, through a streaming pull. The client lease-manages what it holds
// (extending ack deadlines up to an hour); a message is acknowledged by
// Ack only, once the store committed it. What is not acknowledged (the
// collector crashed, the store failed) is delivered again when its ack
// deadline passes, and the store's dedupe key (the message ID) makes
// that harmless.
type Source struct {
	name string
	cfg  Config
	log  *slog.Logger
	dec  decoder
	// poll bounds one wait for messages; after it, an idle source checks
	// that the service answers.
	poll time.Duration

	mu      sync.Mutex
	cl      *ps.Client
	window  int
	msgs    chan *ps.Message
	stop    context.CancelFunc
	stopped chan struct{} // closed when the streaming pull ended
	rerr    error         // why it ended
	closed  bool
	topics  map[string]lookup
}

type lookup struct {
	queue, problem string
	at             time.Time
}

// NewSource returns the source of the collector named name. It does not
// dial: the first Receive does. c must be valid (c.Validate).
func NewSource(name string, c Config, logger *slog.Logger) (*Source, error) {
	logger, err := collect.CheckSource(name, c.Validate(), logger)
	if err != nil {
		return nil, err
	}
	s := &Source{
		name:   name,
		cfg:    c,
		log:    logger.With("component", "pubsub", "collector", name),
		poll:   5 * time.Second,
		topics: map[string]lookup{},
	}
	s.dec = decoder{source: name, sub: fullName(c.Project, "subscriptions", c.Subscription), project: c.Project,
		sourceTopic: c.SourceTopic, topicOf: s.topicOf}
	return s, nil
}

// SetWindow implements collect.Windowed: the subscriber holds at most
// messages unacknowledged, unless max_outstanding says otherwise.
func (s *Source) SetWindow(messages int) {
	s.mu.Lock()
	s.window = messages
	s.mu.Unlock()
}

// start makes the client and the streaming pull, unless they run.
func (s *Source) start() (chan *ps.Message, chan struct{}, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, nil, quarantine.Errorf(quarantine.EUNAVAILABLE, "pubsub: the source is closed")
	}
	if s.msgs != nil {
		return s.msgs, s.stopped, nil
	}
	if s.cl == nil {
		cl, err := s.cfg.newClient()
		if err != nil {
			return nil, nil, err
		}
		s.cl = cl
		s.log.Info("consuming", "config", s.cfg)
	}
	sub := s.cl.Subscriber(s.cfg.Subscription)
	rs := &sub.ReceiveSettings
	rs.MaxOutstandingMessages = 1000
	switch {
	case s.cfg.MaxOutstanding > 0:
		rs.MaxOutstandingMessages = s.cfg.MaxOutstanding
	case s.window > 0:
		rs.MaxOutstandingMessages = s.window
	}
	rs.NumGoroutines = max(s.cfg.Streams, 1)
	rs.MaxOutstandingBytes = 256 << 20
	rs.ShutdownOptions = &ps.ShutdownOptions{Behavior: ps.ShutdownBehaviorNackImmediately, Timeout: 5 * time.Second}
	msgs := make(chan *ps.Message)
	stopped := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	s.msgs, s.stopped, s.stop = msgs, stopped, cancel
	go func() {
		err := sub.Receive(ctx, func(ctx context.Context, m *ps.Message) {
			select {
			case msgs <- m:
			case <-ctx.Done():
				m.Nack()
			}
		})
		s.mu.Lock()
		s.rerr = err
		s.mu.Unlock()
		close(stopped)
	}()
	return msgs, stopped, nil
}

// restart forgets a streaming pull that ended, so that the next Receive
// starts another, and returns why it ended.
func (s *Source) restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.rerr
	s.msgs, s.stopped, s.rerr = nil, nil, nil
	if s.stop != nil {
		s.stop()
		s.stop = nil
	}
	if err == nil {
		err = errors.New("the streaming pull ended")
	}
	code := quarantine.EUNAVAILABLE
	if status.Code(err) == codes.NotFound {
		return &quarantine.Error{Code: code, Err: err, Message: "pubsub: subscription " + s.dec.sub + " does not exist"}
	}
	return &quarantine.Error{Code: code, Err: err, Message: "pubsub: the streaming pull failed"}
}

// Receive returns the next messages: up to max deliveries, waiting at
// most linger after the first for more. It blocks until one is available
// or ctx ends. A message that cannot be decoded is delivered raw and
// flagged, never an error. Errors are EUNAVAILABLE when the streaming
// pull failed for good (no such subscription, permission denied), or
// when nothing came for a while and the service does not answer.
func (s *Source) Receive(ctx context.Context, limit int, linger time.Duration) ([]collect.Delivery, error) {
	limit = min(max(limit, 1), maxBatch)
	msgs, stopped, err := s.start()
	if err != nil {
		return nil, err
	}
	var got []*ps.Message
	for len(got) == 0 {
		t := time.NewTimer(s.poll)
		select {
		case m := <-msgs:
			got = append(got, m)
		case <-stopped:
			t.Stop()
			return nil, s.restart()
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
			if err := s.ping(ctx); err != nil {
				return nil, err
			}
		}
		t.Stop()
	}
	// Take what is there at once, then wait up to linger for more.
	var lc <-chan time.Time
	if linger > 0 {
		lt := time.NewTimer(linger)
		defer lt.Stop()
		lc = lt.C
	}
more:
	for len(got) < limit {
		select {
		case m := <-msgs:
			got = append(got, m)
			continue
		default:
		}
		if lc == nil {
			break
		}
		select {
		case m := <-msgs:
			got = append(got, m)
		case <-lc:
			break more
		case <-ctx.Done():
			break more
		case <-stopped:
			break more
		}
	}
	ds := make([]collect.Delivery, len(got))
	for i, m := range got {
		ds[i] = collect.Delivery{Message: s.dec.decode(m), Handle: m}
	}
	return ds, nil
}

// ping asks for the subscription: an error other than a refusal
// (permission denied: the collector may consume without reading the
// subscription's settings) says the service cannot be reached.
func (s *Source) ping(ctx context.Context) error {
	s.mu.Lock()
	cl := s.cl
	s.mu.Unlock()
	pctx, cancel := context.WithTimeout(ctx, s.poll)
	defer cancel()
	_, err := cl.SubscriptionAdminClient.GetSubscription(pctx, &pubsubpb.GetSubscriptionRequest{Subscription: s.dec.sub})
	switch status.Code(err) {
	case codes.OK, codes.PermissionDenied, codes.Unimplemented:
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return &quarantine.Error{Code: quarantine.EUNAVAILABLE, Err: err, Message: "pubsub: the service does not answer"}
}

// topicOf looks up (and caches) the topic of a source subscription.
func (s *Source) topicOf(project, sub string) (string, string) {
	name := fullName(project, "subscriptions", sub)
	s.mu.Lock()
	l, ok := s.topics[name]
	cl := s.cl
	s.mu.Unlock()
	if ok && (l.queue != "" || time.Since(l.at) < lookupRetry) {
		return l.queue, l.problem
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := cl.SubscriptionAdminClient.GetSubscription(ctx, &pubsubpb.GetSubscriptionRequest{Subscription: name})
	l = lookup{at: time.Now()}
	switch {
	case err != nil:
		l.problem = "cannot read subscription " + name + " (" + status.Code(err).String() + "; the collector needs pubsub.subscriptions.get on it)"
		s.log.Warn("cannot look up the topic of a source subscription", "subscription", name, "err", err)
	case got.GetTopic() == "_deleted-topic_":
		l.problem = "the topic of subscription " + name + " was deleted"
	default:
		l.queue = queueName(s.cfg.Project, got.GetTopic())
	}
	s.mu.Lock()
	s.topics[name] = l
	s.mu.Unlock()
	return l.queue, l.problem
}

// queueName is topic (projects/P/topics/T) as a queue: T when P is the
// collector's project.
func queueName(project, topic string) string {
	if p, id, err := split(topic, "topics"); err == nil && (p == project || p == "") {
		return id
	}
	return topic
}

// Ack acknowledges ds, whose messages the store committed, and waits for
// the service's answer where the subscription has exactly-once delivery
// (elsewhere the acknowledgement is sent in the background: a message
// whose ack is lost is delivered again and deduplicated). An error
// (EUNAVAILABLE) says an acknowledgement was not confirmed.
func (s *Source) Ack(ctx context.Context, ds []collect.Delivery) error {
	rs := make([]*ps.AckResult, len(ds))
	for i, d := range ds {
		m, ok := d.Handle.(*ps.Message)
		if !ok {
			return quarantine.Errorf(quarantine.EINTERNAL, "pubsub: delivery %d was not made by this source", i)
		}
		rs[i] = m.AckWithResult()
	}
	for _, r := range rs {
		st, err := r.Get(ctx)
		if err != nil || st != ps.AcknowledgeStatusSuccess {
			if err == nil {
				err = errors.New("acknowledge status " + ackStatus(st))
			}
			return &quarantine.Error{Code: quarantine.EUNAVAILABLE, Err: err, Message: "pubsub: acknowledgement not confirmed; the message will be delivered again"}
		}
	}
	return nil
}

func ackStatus(st ps.AcknowledgeStatus) string {
	switch st {
	case ps.AcknowledgeStatusPermissionDenied:
		return "permission denied"
	case ps.AcknowledgeStatusFailedPrecondition:
		return "failed precondition"
	case ps.AcknowledgeStatusInvalidAckID:
		return "invalid ack id (expired)"
	}
	return "other"
}

// Close stops the streaming pull, giving back (nacking) what was received
// and not handed out, and closes the client.
func (s *Source) Close() error {
	s.mu.Lock()
	s.closed = true
	stop, stopped, msgs, cl := s.stop, s.stopped, s.msgs, s.cl
	s.mu.Unlock()
	if stop != nil && stopped != nil {
		stop()
		done := false
		for !done {
			select {
			case m := <-msgs:
				m.Nack()
			case <-stopped:
				done = true
			}
		}
	}
	if cl != nil {
		return cl.Close()
	}
	return nil
}

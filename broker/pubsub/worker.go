package pubsub

import (
	"cmp"
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	ps "cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/broker/internal/workdriver"
	"github.com/quarantine-dev/quarantine/worker"
)

// HeaderJobID carries a job's transport ID (worker.Message.ID) as an
// attribute; a delivery shows it as its ID, not as a header.
const HeaderJobID = "x-pubsub-job-id"

// MaxAckDeadline is the longest ack deadline Pub/Sub takes, and so the
// longest retry delay of a WorkDriver.
const MaxAckDeadline = 600 * time.Second

// maxCarried bounds the retry headers a WorkDriver keeps.
const maxCarried = 100_000

// WorkConfig configures a WorkDriver: the work subscription it pulls, the
// work topic Send publishes to, and the failure topic dead letters are
// published to (the topic a collector of kind pubsub drains through a
// subscription).
type WorkConfig struct {
	// Project, Endpoint and CredentialsFile are as in Config.
	Project         string
	Endpoint        string
	CredentialsFile string
	// Topic is the work topic: what Send publishes to when a message
	// names no queue, and the queue of every delivery (the replay
	// destination recorded in a failure envelope).
	Topic string
	// Subscription is the work subscription the driver pulls (on Topic).
	// Give it a dead-letter policy so that Pub/Sub counts deliveries
	// (Delivery.Attempt): without one, a delivery that never settled
	// (the process died) is not counted.
	Subscription string
	// FailureTopic receives the canonical failure envelopes.
	FailureTopic string
	// AckDeadline is the lease of a delivery, renewed every half of it
	// while its handler runs (default 60s, 10s to 600s).
	AckDeadline time.Duration
}

// Validate checks c; errors are EINVALID *quarantine.Error values naming
// the field at fault.
func (c *WorkConfig) Validate() error {
	conn := Config{Project: c.Project, Subscription: c.Subscription, Endpoint: c.Endpoint, CredentialsFile: c.CredentialsFile}
	if err := conn.Validate(); err != nil {
		return err
	}
	for field, t := range map[string]string{"topic": c.Topic, "failure_topic": c.FailureTopic} {
		if _, _, err := split(t, "topics"); err != nil {
			return quarantine.FieldErrorf(quarantine.EINVALID, field, "%s", err)
		}
	}
	if fullName(c.Project, "topics", c.Topic) == fullName(c.Project, "topics", c.FailureTopic) {
		return quarantine.FieldErrorf(quarantine.EINVALID, "failure_topic", "the failure topic must not be the work topic")
	}
	if c.AckDeadline != 0 && (c.AckDeadline < 10*time.Second || c.AckDeadline > MaxAckDeadline) {
		return quarantine.FieldErrorf(quarantine.EINVALID, "ack_deadline", "ack_deadline must be between 10s and 600s")
	}
	return nil
}

var (
	_ worker.Driver = (*WorkDriver)(nil)
	_ worker.Sender = (*WorkDriver)(nil)
)

// WorkDriver is a worker.Driver over a Pub/Sub work subscription, pulled
// with unary Pull calls:
//
//   - Ack acknowledges.
//   - Retry sets the delivery's ack deadline to the delay (rounded up to
//     the second, at most 600 s): Pub/Sub delivers the same message again
//     once it passes, so RetryAfter is honoured as a lower bound, and its
//     delivery count goes on (RetryKeepsCount). Attributes cannot change
//     on a redelivery: the driver keeps the headers the worker set for the
//     retry (its attempt count, a not-before time) in memory and shows
//     them on the redelivery; after a restart the count is Pub/Sub's
//     delivery count (kept only with a dead-letter policy).
//   - DeadLetter publishes the envelope to the failure topic, waits for
//     the service to confirm it, then acknowledges.
//   - Reject nacks: the subscription's dead-letter policy (after its max
//     delivery attempts) or its retry policy applies.
//   - Extend renews the ack deadline.
//
// Close nacks what it handed out and did not settle: it is delivered
// again at once.
type WorkDriver struct {
	cfg WorkConfig
	log *slog.Logger
	cl  *ps.Client
	sub string // the work subscription's full name
	// pollEvery bounds one Pull.
	pollEvery time.Duration

	mu      sync.Mutex
	pubs    map[string]*ps.Publisher
	carried map[string]map[string]string // message ID -> headers for its redelivery
	open    map[string]bool              // ack IDs handed out, not settled
	closed  bool
}

// workRef is a Delivery's Ref.
type workRef struct {
	ackID, msgID string
}

// NewWorkDriver makes the client. It does not dial. Errors are EINVALID
// for a configuration that is not valid.
func NewWorkDriver(cfg WorkConfig, logger *slog.Logger) (*WorkDriver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.Default()
	}
	if cfg.AckDeadline == 0 {
		cfg.AckDeadline = 60 * time.Second
	}
	conn := Config{Project: cfg.Project, Subscription: cfg.Subscription, Endpoint: cfg.Endpoint, CredentialsFile: cfg.CredentialsFile}
	cl, err := conn.newClient()
	if err != nil {
		return nil, err
	}
	return &WorkDriver{cfg: cfg, cl: cl, sub: fullName(cfg.Project, "subscriptions", cfg.Subscription), pollEvery: 30 * time.Second,
		pubs: map[string]*ps.Publisher{}, carried: map[string]map[string]string{}, open: map[string]bool{},
		log: logger.With("component", "pubsub worker", "subscription", cfg.Subscription)}, nil
}

// Limits: delays up to 600 s in whole seconds, a lease renewed every half
// ack deadline, the count kept across retries.
func (w *WorkDriver) Limits() worker.Limits {
	return worker.Limits{MaxDelay: MaxAckDeadline, DelayStep: time.Second, RenewEvery: w.cfg.AckDeadline / 2, RetryKeepsCount: true}
}

// Receive pulls up to limit deliveries. It blocks until one is available
// or ctx ends, or returns EUNAVAILABLE when a Pull fails (the service
// cannot be reached, the subscription does not exist).
func (w *WorkDriver) Receive(ctx context.Context, limit int) ([]*worker.Delivery, error) {
	limit = min(max(limit, 1), 1000)
	for {
		pctx, cancel := context.WithTimeout(ctx, w.pollEvery)
		resp, err := w.cl.SubscriptionAdminClient.Pull(pctx, &pubsubpb.PullRequest{Subscription: w.sub, MaxMessages: int32(limit)})
		cancel()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err != nil {
			return nil, &quarantine.Error{Code: quarantine.EUNAVAILABLE, Err: err, Message: "pubsub: pull from " + w.sub + " failed"}
		}
		rms := resp.GetReceivedMessages()
		if len(rms) == 0 {
			continue
		}
		ids := make([]string, len(rms))
		for i, rm := range rms {
			ids[i] = rm.GetAckId()
		}
		// The whole ack deadline for each handler, whatever the
		// subscription's.
		if err := w.modack(ctx, ids, w.cfg.AckDeadline); err != nil {
			w.log.Warn("could not extend the deadline of pulled messages", "err", err)
		}
		out := make([]*worker.Delivery, len(rms))
		w.mu.Lock()
		for i, rm := range rms {
			out[i] = w.delivery(rm)
			w.open[rm.GetAckId()] = true
		}
		w.mu.Unlock()
		return out, nil
	}
}

// delivery fills a worker.Delivery from rm; w.mu is held.
func (w *WorkDriver) delivery(rm *pubsubpb.ReceivedMessage) *worker.Delivery {
	m := rm.GetMessage()
	d := &worker.Delivery{
		ID:      m.GetMessageId(),
		Queue:   w.cfg.Topic,
		Headers: make(map[string]string, len(m.GetAttributes())+4),
		Body:    m.GetData(),
		Attempt: int(rm.GetDeliveryAttempt()),
		Ref:     &workRef{ackID: rm.GetAckId(), msgID: m.GetMessageId()},
	}
	if t := m.GetPublishTime(); t != nil {
		d.EnqueuedAt = t.AsTime()
	}
	for k, v := range m.GetAttributes() {
		switch {
		case k == HeaderJobID:
			d.ID = v
		case strings.EqualFold(k, HeaderContentType):
			d.ContentType = v
		default:
			d.Headers[k] = v
		}
	}
	for k, v := range w.carried[m.GetMessageId()] {
		d.Headers[k] = v
	}
	return d
}

func refOf(d *worker.Delivery) (*workRef, error) { return workdriver.Ref[workRef](d, "pubsub") }

func (w *WorkDriver) modack(ctx context.Context, ackIDs []string, deadline time.Duration) error {
	secs := int32((deadline + time.Second - 1) / time.Second)
	err := w.cl.SubscriptionAdminClient.ModifyAckDeadline(ctx, &pubsubpb.ModifyAckDeadlineRequest{
		Subscription: w.sub, AckIds: ackIDs, AckDeadlineSeconds: secs})
	if err != nil {
		return &quarantine.Error{Code: quarantine.EUNAVAILABLE, Err: err, Message: "pubsub: modify ack deadline not confirmed"}
	}
	return nil
}

// settled forgets r: handed out no more, and (unless retried) no headers
// to carry.
func (w *WorkDriver) settled(r *workRef, carry map[string]string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.open, r.ackID)
	if carry == nil {
		delete(w.carried, r.msgID)
		return
	}
	if len(w.carried) >= maxCarried {
		clear(w.carried) // a bound: the counts fall back to Pub/Sub's
	}
	w.carried[r.msgID] = carry
}

// Ack acknowledges d.
func (w *WorkDriver) Ack(ctx context.Context, d *worker.Delivery) error {
	r, err := refOf(d)
	if err != nil {
		return err
	}
	if err := w.cl.SubscriptionAdminClient.Acknowledge(ctx, &pubsubpb.AcknowledgeRequest{Subscription: w.sub, AckIds: []string{r.ackID}}); err != nil {
		return &quarantine.Error{Code: quarantine.EUNAVAILABLE, Err: err, Message: "pubsub: acknowledgement not confirmed"}
	}
	w.settled(r, nil)
	return nil
}

// Reject nacks d: the subscription's policies decide.
func (w *WorkDriver) Reject(ctx context.Context, d *worker.Delivery) error {
	r, err := refOf(d)
	if err != nil {
		return err
	}
	if err := w.modack(ctx, []string{r.ackID}, 0); err != nil {
		return err
	}
	w.settled(r, nil)
	return nil
}

// Extend renews d's ack deadline.
func (w *WorkDriver) Extend(ctx context.Context, d *worker.Delivery) error {
	r, err := refOf(d)
	if err != nil {
		return err
	}
	return w.modack(ctx, []string{r.ackID}, w.cfg.AckDeadline)
}

// Retry sets d's ack deadline to delay (0: a nack), so that Pub/Sub
// delivers it again once it passes, and keeps d.Headers for that
// redelivery.
func (w *WorkDriver) Retry(ctx context.Context, d *worker.Delivery, delay time.Duration) error {
	r, err := refOf(d)
	if err != nil {
		return err
	}
	if err := w.modack(ctx, []string{r.ackID}, min(max(delay, 0), MaxAckDeadline)); err != nil {
		return err
	}
	carry := make(map[string]string, len(d.Headers))
	for k, v := range d.Headers {
		carry[k] = v
	}
	w.settled(r, carry)
	return nil
}

// DeadLetter publishes envelope to the failure topic, waits for the
// service to confirm it, then acknowledges d.
func (w *WorkDriver) DeadLetter(ctx context.Context, d *worker.Delivery, envelope []byte) error {
	if _, err := refOf(d); err != nil {
		return err
	}
	m := &ps.Message{Data: envelope, Attributes: map[string]string{HeaderContentType: "application/json"}}
	if err := w.publish(ctx, w.cfg.FailureTopic, m); err != nil {
		return err
	}
	return w.Ack(ctx, d)
}

// Send publishes a job message to m.Queue (default the work topic) and
// waits for the service to confirm it.
func (w *WorkDriver) Send(ctx context.Context, m *worker.Message) error {
	attrs := workdriver.Headers(m, 3)
	if m.ContentType != "" {
		attrs[HeaderContentType] = m.ContentType
	}
	if m.ID != "" {
		attrs[HeaderJobID] = m.ID
	}
	return w.publish(ctx, cmp.Or(m.Queue, w.cfg.Topic), &ps.Message{Data: m.Body, Attributes: attrs})
}

func (w *WorkDriver) publish(ctx context.Context, topic string, m *ps.Message) error {
	full, err := destination(w.cfg.Project, topic)
	if err != nil {
		return err
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return quarantine.Errorf(quarantine.EUNAVAILABLE, "pubsub: the work driver is closed")
	}
	t := w.pubs[full]
	if t == nil {
		t = newTopicPublisher(w.cl, full)
		w.pubs[full] = t
	}
	w.mu.Unlock()
	if _, err := t.Publish(ctx, m).Get(ctx); err != nil {
		code := quarantine.EUNAVAILABLE
		if status.Code(err) == codes.NotFound {
			code = quarantine.ENOTFOUND
		}
		return &quarantine.Error{Code: code, Err: err, Message: "pubsub: the message for " + full + " was not confirmed"}
	}
	return nil
}

// Close nacks the deliveries handed out and not settled (they are
// delivered again at once), stops the publishers and closes the client.
func (w *WorkDriver) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	open := make([]string, 0, len(w.open))
	for id := range w.open {
		open = append(open, id)
	}
	pubs := w.pubs
	w.mu.Unlock()
	if len(open) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := w.modack(ctx, open, 0); err != nil {
			w.log.Warn("could not give back unsettled deliveries: they come back after their ack deadline", "err", err)
		}
		cancel()
	}
	for _, t := range pubs {
		t.Stop()
	}
	return w.cl.Close()
}

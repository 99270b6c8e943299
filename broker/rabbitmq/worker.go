package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/redacturl"
	"github.com/quarantine-dev/quarantine/worker"
)

// DefaultDelayBuckets are the delay queues a WorkDriver uses by default.
var DefaultDelayBuckets = []time.Duration{
	250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2 * time.Second, 3 * time.Second, 5 * time.Second, 10 * time.Second,
	15 * time.Second, 20 * time.Second, 30 * time.Second, 45 * time.Second,
	time.Minute, 90 * time.Second, 2 * time.Minute, 3 * time.Minute, 5 * time.Minute,
	7*time.Minute + 30*time.Second, 10 * time.Minute, 15 * time.Minute, 20 * time.Minute,
	30 * time.Minute, 45 * time.Minute,
	time.Hour, 90 * time.Minute, 2 * time.Hour, 3 * time.Hour, 4 * time.Hour,
	6 * time.Hour, 8 * time.Hour, 12 * time.Hour, 18 * time.Hour, 24 * time.Hour,
}

const (
	// MaxDelayBuckets caps the number of delay queues of one work queue.
	MaxDelayBuckets = 64
	// MaxBucketDelay is the longest delay bucket allowed.
	MaxBucketDelay = 24 * time.Hour
	// delayExpiryMargin is how long an idle delay queue outlives its TTL.
	delayExpiryMargin = 10 * time.Minute
	// redeclareEvery: a delay queue declared longer ago than this is
	// declared again before a publish (resetting its x-expires clock).
	redeclareEvery = time.Minute
	// defaultRequeueAfter is WorkConfig.RequeueAfter's default.
	defaultRequeueAfter = 5 * time.Second
	// defaultWorkPrefetch is WorkConfig.Prefetch's default.
	defaultWorkPrefetch = 32
)

// WorkConfig configures a WorkDriver.
type WorkConfig struct {
	// URL is the broker, amqp://USER:PASS@HOST:PORT/VHOST (a secret: it is
	// only ever printed redacted).
	URL string
	// Queue is the work queue; FailureQueue receives the failure
	// envelopes (the queue a collector drains).
	Queue        string
	FailureQueue string
	// Prefetch is the consumer's basic.qos prefetch count (default 32).
	// Keep it at or above the worker's total job concurrency.
	Prefetch int
	// Declare creates Queue and FailureQueue (durable; QueueType) when
	// they do not exist. By default they are checked and a missing one is
	// an error.
	Declare bool
	// QueueType is x-queue-type for Declare: "" (the broker's default),
	// "classic" or "quorum". Quorum queues count deliveries
	// (x-delivery-count), which the worker's attempt cap then uses.
	QueueType string
	// DelayBuckets are the delays Retry can honour, increasing, in whole
	// milliseconds, at most MaxDelayBuckets of them, none above 24 h;
	// nil means DefaultDelayBuckets. A delay is rounded up to a bucket.
	DelayBuckets []time.Duration
	// RequeueAfter is how long after a failed Retry or DeadLetter publish
	// (the broker refused or did not confirm it, the failure queue is
	// missing) the delivery goes back to the queue (basic.nack, requeue)
	// for another attempt at it. Default 5 s.
	RequeueAfter time.Duration
	// Name appears in the connection name ("quarantine worker NAME");
	// default the queue name.
	Name string
}

// validate checks c and fills its defaults.
func (c *WorkConfig) validate() error {
	u, err := url.Parse(c.URL)
	switch {
	case strings.TrimSpace(c.URL) == "":
		return quarantine.FieldErrorf(quarantine.EINVALID, "url", "a RabbitMQ worker needs url: amqp://USER:PASS@HOST:5672/")
	case err != nil:
		return quarantine.FieldErrorf(quarantine.EINVALID, "url", "the url is not a valid amqp:// URL")
	case u.Scheme != "amqp" && u.Scheme != "amqps":
		return quarantine.FieldErrorf(quarantine.EINVALID, "url", "%q: the scheme must be amqp or amqps", redacturl.URL(c.URL))
	case c.Queue == "":
		return quarantine.FieldErrorf(quarantine.EINVALID, "queue", "the work queue is required")
	case c.FailureQueue == "":
		return quarantine.FieldErrorf(quarantine.EINVALID, "failure_queue", "the failure queue is required")
	case c.FailureQueue == c.Queue:
		return quarantine.FieldErrorf(quarantine.EINVALID, "failure_queue", "the failure queue must differ from the work queue")
	case len(c.Queue)+len(".delay.")+8 > maxNameBytes:
		return quarantine.FieldErrorf(quarantine.EINVALID, "queue", "the work queue name is too long for its delay queues (%d bytes at most)", maxNameBytes-len(".delay.")-8)
	case len(c.FailureQueue) > maxNameBytes:
		return quarantine.FieldErrorf(quarantine.EINVALID, "failure_queue", "failure_queue is longer than %d bytes", maxNameBytes)
	case c.Prefetch < 0 || c.Prefetch > math.MaxUint16:
		return quarantine.FieldErrorf(quarantine.EINVALID, "prefetch", "prefetch must be between 0 (default %d) and %d", defaultWorkPrefetch, math.MaxUint16)
	case c.QueueType != "" && c.QueueType != "classic" && c.QueueType != "quorum":
		return quarantine.FieldErrorf(quarantine.EINVALID, "queue_type", "queue_type must be classic or quorum, got %q", c.QueueType)
	}
	if c.Prefetch == 0 {
		c.Prefetch = defaultWorkPrefetch
	}
	if c.DelayBuckets == nil {
		c.DelayBuckets = DefaultDelayBuckets
	}
	if len(c.DelayBuckets) == 0 || len(c.DelayBuckets) > MaxDelayBuckets {
		return quarantine.FieldErrorf(quarantine.EINVALID, "delay_buckets", "between 1 and %d delay buckets are allowed, got %d", MaxDelayBuckets, len(c.DelayBuckets))
	}
	for i, b := range c.DelayBuckets {
		switch {
		case b <= 0 || b%time.Millisecond != 0:
			return quarantine.FieldErrorf(quarantine.EINVALID, "delay_buckets", "delay bucket %s is not a positive whole number of milliseconds", b)
		case b > MaxBucketDelay:
			return quarantine.FieldErrorf(quarantine.EINVALID, "delay_buckets", "delay bucket %s is above %s", b, MaxBucketDelay)
		case i > 0 && b <= c.DelayBuckets[i-1]:
			return quarantine.FieldErrorf(quarantine.EINVALID, "delay_buckets", "delay buckets must increase: %s after %s", b, c.DelayBuckets[i-1])
		}
	}
	c.DelayBuckets = append([]time.Duration(nil), c.DelayBuckets...)
	if c.Name == "" {
		c.Name = c.Queue
	}
	if c.RequeueAfter <= 0 {
		c.RequeueAfter = defaultRequeueAfter
	}
	return nil
}

// DelayQueueName is the delay queue of queue for a delay of d (whole
// milliseconds).
func DelayQueueName(queue string, d time.Duration) string {
	return queue + ".delay." + strconv.FormatInt(d.Milliseconds(), 10)
}

// WorkDriver is a worker.Driver and a worker.Sender over one RabbitMQ
// work queue and its failure queue. It dials lazily (NewWorkDriver does
// not) and is safe for concurrent use.
//
// # Delays
//
// A retry with a delay is published to a delay queue named
// "<queue>.delay.<ms>": a durable classic queue with x-message-ttl <ms>,
// x-dead-letter-exchange "" and x-dead-letter-routing-key <queue>, so that
// the broker moves the message back to the work queue when the TTL ends.
// Every message of one delay queue has the same TTL, so expiry never
// waits behind a longer one (a per-message TTL would: RabbitMQ only
// expires the head of a queue). A delay of 0 is published straight to the
// work queue.
//
// The delays are a fixed, sorted set of buckets (WorkConfig.DelayBuckets,
// by default DefaultDelayBuckets: 250 ms to 24 h): Retry rounds a delay up
// to the next bucket, so a job never runs before its delay (RetryAfter is
// honoured) but may run later, by at most the gap to the next bucket
// (about ×1.5 in the defaults, ×2 below 1 s). Rounding up is what keeps
// the number of delay queues bounded: the worker's full-jitter backoff
// asks for a different delay every time, and one queue per millisecond
// value would mean thousands of queues. A delay above the largest bucket
// cannot be honoured: Limits().MaxDelay is the largest bucket and
// ValidateDelay refuses anything longer, so worker.Register rejects a job
// whose backoff can exceed it, when the job is defined.
//
// A delay queue has x-expires <ms> + 10 min, so that idle ones go away.
// RabbitMQ deletes an expired queue with its messages, and publishing does
// not count as use, so the driver re-declares a delay queue before it
// publishes to it unless it declared it less than a minute earlier: the
// queue then outlives its last message by at least nine minutes. The
// queue's arguments derive from <ms> alone, so every worker on the queue
// declares it identically.
//
// # Settlement
//
// Ack is basic.ack. Retry publishes the delivery's body and d.Headers
// (persistent, same message_id, type and timestamp) with mandatory set and
// waits for the publisher confirm, then acks the original. DeadLetter
// publishes the envelope (application/json, message_id the job id) to the
// failure queue the same way, and acks only once it is confirmed. Reject
// is basic.reject without requeue: the work queue's own dead-letter
// policy (x-dead-letter-exchange) decides, and without one the broker
// drops the message. Extend does nothing: RabbitMQ has no per-message
// lease. A delivery stays with the consumer until the channel closes or
// the broker's consumer_timeout (default 30 min) closes the channel for
// an unacknowledged delivery; raise consumer_timeout above the longest
// handler.
//
// When that publish fails (nacked, unroutable, not confirmed in time) the
// settlement returns an error and the delivery is not acked; since
// RabbitMQ has no lease to expire, the driver hands it back to the queue
// with basic.nack requeue after WorkConfig.RequeueAfter (5 s), so it is
// redelivered rather than held by this consumer until the channel closes.
//
// A crash between the confirm and the ack leaves two copies (the retry and
// the redelivered original); the idempotency-key claim makes the second
// one a duplicate, not a second effect.
//
// # Connection loss
//
// The driver holds one connection with two channels: a consumer channel
// (manual acks, basic.qos Prefetch) and a publisher channel in confirm
// mode. When the connection or the consumer channel is lost, Receive
// returns an EUNAVAILABLE error (the worker loop retries it) and the next
// call dials again. A delivery tag is only valid on the channel that
// issued it: settling a delivery of a lost channel returns an error
// without publishing anything, and the broker redelivers it.
//
// # Headers and attempts
//
// Headers are strings (AMQP values of other types JSON-encoded, as the
// collector does). The broker's own bookkeeping headers (x-death,
// x-first-death-*, x-last-death-*, x-delivery-count) are left out of
// Delivery.Headers and are never republished: they describe the delay
// queues' dead-lettering, not the job. Delivery.Attempt is
// x-delivery-count + 1 when the header is there (a quorum queue sets it on
// a redelivery), else 0 (unknown: a first delivery, or a classic queue,
// which does not count). The worker also counts with its own
// x-quarantine-attempts header, which every retry carries; so a classic
// queue does not count deliveries lost to crashes, a quorum queue does.
type WorkDriver struct {
	cfg WorkConfig
	log *slog.Logger

	mu     sync.Mutex
	sess   *workSession
	closed bool
	used   map[time.Duration]bool // delay buckets published to
}

var (
	_ worker.Driver         = (*WorkDriver)(nil)
	_ worker.Sender         = (*WorkDriver)(nil)
	_ worker.DelayValidator = (*WorkDriver)(nil)
)

// workSession is one connection with its consumer and publisher channels.
type workSession struct {
	conn *amqp.Connection

	// The consumer, started by the first Receive. Guarded by WorkDriver.mu
	// until set.
	cch        *amqp.Channel
	ctag       string
	deliveries <-chan amqp.Delivery

	// The publisher: one publish in flight at a time, so that a
	// basic.return is the call's own.
	pubMu    sync.Mutex
	pch      *amqp.Channel
	returns  chan amqp.Return
	declared map[time.Duration]time.Time // delay queue → last declare
}

// workRef is a Delivery's Ref: its session and delivery tag.
type workRef struct {
	sess      *workSession
	tag       uint64
	timestamp time.Time
}

// NewWorkDriver returns a driver for cfg. It does not dial: the first
// Receive or Send does. A nil logger discards.
func NewWorkDriver(cfg WorkConfig, logger *slog.Logger) (*WorkDriver, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &WorkDriver{cfg: cfg, used: map[time.Duration]bool{},
		log: logger.With("component", "rabbitmq worker", "queue", cfg.Queue)}, nil
}

// Queue returns the work queue's name.
func (d *WorkDriver) Queue() string { return d.cfg.Queue }

// DelayBuckets returns the delays the driver honours, increasing.
func (d *WorkDriver) DelayBuckets() []time.Duration {
	return append([]time.Duration(nil), d.cfg.DelayBuckets...)
}

// Limits implements worker.Driver: delays up to the largest bucket, in
// milliseconds; no lease renewal (Extend is a no-op).
func (d *WorkDriver) Limits() worker.Limits {
	return worker.Limits{MaxDelay: d.cfg.DelayBuckets[len(d.cfg.DelayBuckets)-1], DelayStep: time.Millisecond}
}

// ValidateDelay implements worker.DelayValidator: a delay up to the
// largest bucket is honoured (rounded up to a bucket).
func (d *WorkDriver) ValidateDelay(delay time.Duration) error {
	top := d.cfg.DelayBuckets[len(d.cfg.DelayBuckets)-1]
	if delay > top {
		return fmt.Errorf("rabbitmq: a delay of %s exceeds the largest delay bucket of queue %s, %s (WorkConfig.DelayBuckets)", delay, d.cfg.Queue, top)
	}
	if delay < 0 {
		return fmt.Errorf("rabbitmq: a negative delay %s", delay)
	}
	return nil
}

// bucket returns the delay queue's delay for delay: the smallest bucket
// at or above it (the largest when delay is above them all).
func (d *WorkDriver) bucket(delay time.Duration) time.Duration {
	for _, b := range d.cfg.DelayBuckets {
		if b >= delay {
			return b
		}
	}
	return d.cfg.DelayBuckets[len(d.cfg.DelayBuckets)-1]
}

// Close cancels the consumer, re-sends the deliveries the broker pushed
// (prefetch) that Receive never returned (see returnUnseen), and closes
// the connection. Deliveries Receive returned and that were not settled
// go back to the queue; Receive and Send fail afterwards. Call it after
// the worker's Run returned.
func (d *WorkDriver) Close() error {
	d.mu.Lock()
	d.closed = true
	s := d.sess
	d.sess = nil
	d.mu.Unlock()
	if s == nil {
		return nil
	}
	done := make(chan struct{})
	go func() { defer close(done); d.returnUnseen(s) }()
	select {
	case <-done:
	case <-time.After(6 * time.Second): // a broker that does not answer: closing ends it
	}
	if err := s.conn.Close(); err != nil && !errors.Is(err, amqp.ErrClosed) {
		return err
	}
	return nil
}

// returnUnseen cancels s's consumer and puts each delivery still
// buffered (pushed by the broker, never returned by Receive) back on the
// work queue as a new message, then acks it. Left to the channel's
// closing, the broker would requeue them and a quorum queue would count
// a delivery the worker never saw (x-delivery-count), spending an
// attempt. The copy carries x-quarantine-attempts so that its attempt is
// the one the unseen delivery would have had. A copy that cannot be
// published (within 5 s in all) is left to the requeue.
func (d *WorkDriver) returnUnseen(s *workSession) {
	if s.cch == nil || s.cch.IsClosed() {
		return
	}
	if err := s.cch.Cancel(s.ctag, false); err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for m := range s.deliveries {
		if ctx.Err() != nil {
			continue // requeued when the channel closes
		}
		dv := d.delivery(s, &m)
		h, err := strconv.Atoi(dv.Header(worker.HeaderAttempts))
		if err != nil || h < 0 {
			h = 0
		}
		if done := h + max(dv.Attempt, 1) - 1; done > 0 {
			dv.Headers[worker.HeaderAttempts] = strconv.Itoa(done)
		}
		r := dv.Ref.(*workRef)
		if err := s.publish(ctx, d.cfg.Queue, d.cfg.Queue, 0, d.republishing(dv, r)); err != nil {
			d.log.Warn("cannot return an unseen delivery as a new message: the broker requeues it", "delivery", word(dv.ID), "err", err)
			continue
		}
		if err := s.cch.Ack(r.tag, false); err != nil {
			d.log.Warn("an unseen delivery was re-sent but could not be acked: two copies (the claim absorbs the duplicate)", "delivery", word(dv.ID), "err", err)
		}
	}
}

// republishing is the message Retry publishes for dv: its body and
// headers, persistent, with the same message_id, type and timestamp.
func (d *WorkDriver) republishing(dv *worker.Delivery, r *workRef) amqp.Publishing {
	return persistent(table(dv.Headers), dv.ContentType, dv.ID, dv.JobName, r.timestamp, dv.Body)
}

// session returns the live session, dialling one when there is none or
// the last one was lost. Guarded by d.mu.
func (d *WorkDriver) sessionLocked() (*workSession, error) {
	if d.closed {
		return nil, quarantine.Errorf(quarantine.EUNAVAILABLE, "rabbitmq: the worker driver is closed")
	}
	if s := d.sess; s != nil {
		if !s.conn.IsClosed() && (s.cch == nil || !s.cch.IsClosed()) {
			return s, nil
		}
		d.dropLocked(s, amqp.ErrClosed)
	}
	conn, err := connect(d.cfg.URL, "quarantine worker "+d.cfg.Name, amqp.DefaultDial(dialTimeout))
	if err != nil {
		return nil, err
	}
	if err := d.checkQueues(conn); err != nil {
		_ = conn.Close()
		return nil, err
	}
	s := &workSession{conn: conn, declared: map[time.Duration]time.Time{}}
	d.sess = s
	d.log.Info("connected to RabbitMQ", "url", redacturl.URL(d.cfg.URL))
	return s, nil
}

// checkQueues checks (or declares) the work and failure queues.
func (d *WorkDriver) checkQueues(conn *amqp.Connection) error {
	for _, q := range []struct{ field, name string }{{"queue", d.cfg.Queue}, {"failure_queue", d.cfg.FailureQueue}} {
		ch, err := conn.Channel()
		if err != nil {
			return unavailable(err, "cannot open a channel")
		}
		if d.cfg.Declare {
			var args amqp.Table
			if d.cfg.QueueType != "" {
				args = amqp.Table{"x-queue-type": d.cfg.QueueType}
			}
			_, err = ch.QueueDeclare(q.name, true, false, false, false, args)
		} else {
			_, err = ch.QueueDeclarePassive(q.name, true, false, false, false, nil)
		}
		if err != nil {
			if isNotFound(err) {
				return &quarantine.Error{Code: quarantine.EUNAVAILABLE, Field: q.field, Err: err, Message: fmt.Sprintf(
					"rabbitmq: queue %s does not exist on the broker: create it (or set Declare)", word(q.name))}
			}
			return unavailable(err, "cannot check queue %s", word(q.name))
		}
		_ = ch.Close()
	}
	return nil
}

// dropLocked forgets s, closing its connection. Guarded by d.mu.
func (d *WorkDriver) dropLocked(s *workSession, cause error) {
	forget(&d.sess, s, d.log, cause, "call")
}

// consumer returns a session whose consumer runs.
func (d *WorkDriver) consumer() (*workSession, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, err := d.sessionLocked()
	if err != nil {
		return nil, err
	}
	if s.cch != nil {
		return s, nil
	}
	ch, err := s.conn.Channel()
	if err != nil {
		d.dropLocked(s, err)
		return nil, unavailable(err, "cannot open a channel")
	}
	if err := ch.Qos(d.cfg.Prefetch, 0, false); err != nil {
		d.dropLocked(s, err)
		return nil, unavailable(err, "cannot set the prefetch to %d", d.cfg.Prefetch)
	}
	tag := consumerTag("worker-" + d.cfg.Name)
	ds, err := ch.Consume(d.cfg.Queue, tag, false, false, false, false, nil)
	if err != nil {
		d.dropLocked(s, err)
		return nil, unavailable(err, "cannot consume from queue %s", word(d.cfg.Queue))
	}
	s.cch, s.ctag, s.deliveries = ch, tag, ds
	return s, nil
}

// lost reports the loss of s's consumer and forgets s.
func (d *WorkDriver) lost(s *workSession) error {
	d.mu.Lock()
	d.dropLocked(s, amqp.ErrClosed)
	d.mu.Unlock()
	return unavailable(amqp.ErrClosed, "the consumer on queue %s was lost (connection or channel closed, or the consumer cancelled): the next receive dials again", word(d.cfg.Queue))
}

// Receive implements worker.Driver.
func (d *WorkDriver) Receive(ctx context.Context, max int) ([]*worker.Delivery, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s, err := d.consumer()
	if err != nil {
		return nil, err
	}
	var out []*worker.Delivery
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case m, ok := <-s.deliveries:
		if !ok {
			return nil, d.lost(s)
		}
		out = append(out, d.delivery(s, &m))
	}
	for len(out) < max {
		select {
		case m, ok := <-s.deliveries:
			if !ok {
				return out, nil // the next Receive reports the loss
			}
			out = append(out, d.delivery(s, &m))
		default:
			return out, nil
		}
	}
	return out, nil
}

// delivery maps an AMQP delivery onto a worker.Delivery.
func (d *WorkDriver) delivery(s *workSession, m *amqp.Delivery) *worker.Delivery {
	attempt := 0
	if n, ok := integer(m.Headers["x-delivery-count"]); ok && n >= 0 && n < math.MaxInt32 {
		attempt = int(n) + 1
	}
	var t amqp.Table
	if len(m.Headers) > 0 {
		t = make(amqp.Table, len(m.Headers))
		for k, v := range m.Headers {
			if !brokerHeader(k) {
				t[k] = v
			}
		}
	}
	h, _ := stringHeaders(t)
	if h == nil {
		h = map[string]string{}
	}
	wd := &worker.Delivery{
		ID: m.MessageId, Queue: d.cfg.Queue, JobName: m.Type, Headers: h, Body: m.Body,
		ContentType: m.ContentType, Attempt: attempt,
		Ref: &workRef{sess: s, tag: m.DeliveryTag, timestamp: m.Timestamp},
	}
	if !m.Timestamp.IsZero() {
		wd.EnqueuedAt = m.Timestamp.UTC()
	}
	return wd
}

// brokerHeader reports whether name is the broker's bookkeeping, never
// passed to the worker nor republished.
func brokerHeader(name string) bool {
	l := strings.ToLower(name)
	return l == "x-death" || l == "x-delivery-count" ||
		strings.HasPrefix(l, "x-first-death-") || strings.HasPrefix(l, "x-last-death-")
}

// ErrChannelLost is returned when settling a delivery whose channel is
// gone: its tag is void, and the broker redelivers it.
var ErrChannelLost = errors.New("rabbitmq: the delivery's channel was lost; the broker redelivers it")

// ref returns d's handle, or an error when its channel is gone.
func (d *WorkDriver) ref(dv *worker.Delivery) (*workRef, error) {
	r, ok := dv.Ref.(*workRef)
	if !ok || r == nil || r.sess == nil || r.sess.cch == nil {
		return nil, fmt.Errorf("rabbitmq: delivery %s was not received by this driver", word(dv.ID))
	}
	if r.sess.cch.IsClosed() {
		return nil, &quarantine.Error{Code: quarantine.EUNAVAILABLE, Err: ErrChannelLost,
			Message: fmt.Sprintf("delivery %s", word(dv.ID))}
	}
	return r, nil
}

// Ack implements worker.Driver (basic.ack; AMQP does not confirm acks,
// so this returns once the frame is written).
func (d *WorkDriver) Ack(_ context.Context, dv *worker.Delivery) error {
	r, err := d.ref(dv)
	if err != nil {
		return err
	}
	if err := r.sess.cch.Ack(r.tag, false); err != nil {
		return unavailable(err, "cannot ack delivery %s", word(dv.ID))
	}
	return nil
}

// Reject implements worker.Driver: basic.reject without requeue, so the
// work queue's dead-letter policy decides.
func (d *WorkDriver) Reject(_ context.Context, dv *worker.Delivery) error {
	r, err := d.ref(dv)
	if err != nil {
		return err
	}
	if err := r.sess.cch.Reject(r.tag, false); err != nil {
		return unavailable(err, "cannot reject delivery %s", word(dv.ID))
	}
	return nil
}

// Extend implements worker.Driver. RabbitMQ has no per-message lease (a
// delivery is the consumer's until its channel closes or consumer_timeout
// passes), so it only reports a delivery whose channel is gone.
func (d *WorkDriver) Extend(_ context.Context, dv *worker.Delivery) error {
	_, err := d.ref(dv)
	return err
}

// Retry implements worker.Driver: the body and dv.Headers go to the delay
// queue of the bucket at or above delay (the work queue itself for 0),
// confirmed, then the original is acked.
func (d *WorkDriver) Retry(ctx context.Context, dv *worker.Delivery, delay time.Duration) error {
	r, err := d.ref(dv)
	if err != nil {
		return err
	}
	p := d.republishing(dv, r)
	var bucket time.Duration
	target := d.cfg.Queue
	if delay > 0 {
		bucket = d.bucket(delay)
		target = DelayQueueName(d.cfg.Queue, bucket)
		d.mu.Lock()
		d.used[bucket] = true
		d.mu.Unlock()
	}
	if err := r.sess.publish(ctx, d.cfg.Queue, target, bucket, p); err != nil {
		d.requeueLater(r)
		return err
	}
	if err := r.sess.cch.Ack(r.tag, false); err != nil {
		return unavailable(err, "the retry of delivery %s is confirmed but the original could not be acked: the broker redelivers it (the claim absorbs the duplicate)", word(dv.ID))
	}
	return nil
}

// DeadLetter implements worker.Driver: the envelope goes to the failure
// queue (mandatory, persistent, application/json), and only once the
// broker confirmed it is the original acked.
func (d *WorkDriver) DeadLetter(ctx context.Context, dv *worker.Delivery, envelope []byte) error {
	r, err := d.ref(dv)
	if err != nil {
		return err
	}
	h := amqp.Table{}
	if k := dv.Header(worker.HeaderIdempotencyKey); k != "" {
		h[worker.HeaderIdempotencyKey] = k
	}
	p := persistent(h, "application/json", dv.ID, dv.JobName, now(), envelope)
	if err := r.sess.publish(ctx, d.cfg.Queue, d.cfg.FailureQueue, 0, p); err != nil {
		d.requeueLater(r)
		return err
	}
	if err := r.sess.cch.Ack(r.tag, false); err != nil {
		return unavailable(err, "the failure envelope of delivery %s is confirmed but the original could not be acked: the broker redelivers it", word(dv.ID))
	}
	return nil
}

// requeueLater returns a delivery whose Retry or DeadLetter publish
// failed to the queue (basic.nack with requeue) after RequeueAfter:
// RabbitMQ has no lease, so a delivery left unacknowledged on a live
// channel would otherwise stay with this consumer until the channel
// closes or consumer_timeout passes. A delivery of a lost channel is
// already back in the queue.
func (d *WorkDriver) requeueLater(r *workRef) {
	if r.sess.cch.IsClosed() {
		return
	}
	time.AfterFunc(d.cfg.RequeueAfter, func() {
		if err := r.sess.cch.Nack(r.tag, false, true); err != nil && !errors.Is(err, amqp.ErrClosed) {
			d.log.Warn("cannot requeue a delivery whose settlement failed", "err", err)
		}
	})
}

// Send implements worker.Sender: m goes to the work queue, persistent,
// with its id as message_id and its job name as type, and Send returns
// once the broker confirmed it. It returns an error when m names another
// queue.
func (d *WorkDriver) Send(ctx context.Context, m *worker.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if m.Queue != "" && m.Queue != d.cfg.Queue {
		return quarantine.Errorf(quarantine.EINVALID, "rabbitmq: message for queue %s sent to %s", word(m.Queue), word(d.cfg.Queue))
	}
	if err := checkShort(m.Headers, [2]string{"the message id", m.ID}, [2]string{"the job name", m.JobName},
		[2]string{"the content type", m.ContentType}); err != nil {
		return err
	}
	d.mu.Lock()
	s, err := d.sessionLocked()
	d.mu.Unlock()
	if err != nil {
		return err
	}
	return s.publish(ctx, d.cfg.Queue, d.cfg.Queue, 0, persistent(table(m.Headers), m.ContentType, m.ID, m.JobName, now(), m.Body))
}

// table turns string headers into an AMQP table, less the broker's own.
func table(h map[string]string) amqp.Table {
	t := make(amqp.Table, len(h))
	for k, v := range h {
		if !brokerHeader(k) {
			t[k] = v
		}
	}
	return t
}

// publish sends p to queue target through the default exchange, mandatory,
// and waits for the confirm. A non-zero bucket makes target the delay
// queue of work queue with that TTL, declared first when needed.
func (s *workSession) publish(ctx context.Context, work, target string, bucket time.Duration, p amqp.Publishing) error {
	s.pubMu.Lock()
	defer s.pubMu.Unlock()
	ch, err := s.pubChannel()
	if err != nil {
		return err
	}
	if bucket > 0 {
		if err := s.declareDelay(ch, work, target, bucket); err != nil {
			return err
		}
	}
	drainReturns(s.returns, nil) // left over from an abandoned call
	c, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", target, true, false, p)
	if err != nil {
		return unavailable(err, "cannot publish to queue %s", word(target))
	}
	select {
	case <-c.Done():
	case <-ctx.Done():
		return unavailable(ctx.Err(), "waiting for the broker's confirm of the message for queue %s", word(target))
	}
	if !c.Acked() {
		if ch.IsClosed() {
			return unavailable(amqp.ErrClosed, "the channel was lost before the broker confirmed the message for queue %s", word(target))
		}
		return quarantine.Errorf(quarantine.EUNAVAILABLE, "rabbitmq: the broker refused (nacked) the message for queue %s", word(target))
	}
	// basic.return precedes the basic.ack of the same message and is
	// handed over first: it is buffered by now.
	returned := false
	drainReturns(s.returns, func(r amqp.Return) {
		if r.RoutingKey == target && r.MessageId == p.MessageId {
			returned = true
		}
	})
	if returned {
		return &quarantine.Error{Code: quarantine.ENOTFOUND,
			Message: fmt.Sprintf("rabbitmq: no queue named %s: the message was unroutable", word(target))}
	}
	return nil
}

// pubChannel returns the confirm-mode channel, opening one when there is
// none or the last one closed (a failed declare closes it). Guarded by
// pubMu.
func (s *workSession) pubChannel() (*amqp.Channel, error) {
	if s.pch != nil && !s.pch.IsClosed() {
		return s.pch, nil
	}
	ch, err := confirmChannel(s.conn, "a publisher channel")
	if err != nil {
		return nil, err
	}
	s.pch, s.returns = ch, ch.NotifyReturn(make(chan amqp.Return, 16))
	return ch, nil
}

// declareDelay declares the delay queue name (TTL bucket, dead-lettering
// to work) unless this session declared it within redeclareEvery.
// Guarded by pubMu.
func (s *workSession) declareDelay(ch *amqp.Channel, work, name string, bucket time.Duration) error {
	if at, ok := s.declared[bucket]; ok && time.Since(at) < redeclareEvery {
		return nil
	}
	_, err := ch.QueueDeclare(name, true, false, false, false, delayArgs(work, bucket))
	if err != nil {
		return unavailable(err, "cannot declare delay queue %s", word(name))
	}
	s.declared[bucket] = time.Now()
	return nil
}

// delayArgs are the arguments of work's delay queue for bucket: they
// depend on the bucket alone, so every worker declares them alike.
func delayArgs(work string, bucket time.Duration) amqp.Table {
	ms := bucket.Milliseconds()
	return amqp.Table{
		"x-message-ttl":             ms,
		"x-dead-letter-exchange":    "",
		"x-dead-letter-routing-key": work,
		"x-expires":                 ms + delayExpiryMargin.Milliseconds(),
	}
}

// usedDelayQueues returns the delay queues the driver published to.
func (d *WorkDriver) usedDelayQueues() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for b := range d.used {
		out = append(out, DelayQueueName(d.cfg.Queue, b))
	}
	return out
}

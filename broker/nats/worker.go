package nats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/defaults"
	"github.com/quarantine-dev/quarantine/internal/redacturl"
	"github.com/quarantine-dev/quarantine/worker"
)

// Defaults and bounds of WorkConfig.
const (
	// DefaultWorkAckWait is the AckWait of the work consumer. The worker
	// renews a running handler's delivery every half of it (InProgress).
	DefaultWorkAckWait = 30 * time.Second
	// DefaultWorkMaxDelay is the longest retry delay the driver accepts by
	// default (NakWithDelay takes any duration; this bounds it to
	// something an operator can reason about).
	DefaultWorkMaxDelay = 24 * time.Hour
	// DefaultWorkMaxAckPending bounds the deliveries of the work consumer
	// not yet settled, across every worker sharing it.
	DefaultWorkMaxAckPending = 1000
	// defaultWorkPoll is the longest one pull request waits.
	defaultWorkPoll = 5 * time.Second
	// WorkStateTTL is how long the retry state of a message is kept in
	// the state bucket after its last retry (see WorkDriver). A message
	// redelivered later than that counts every delivery as an attempt.
	WorkStateTTL = 30 * 24 * time.Hour
)

// WorkConfig configures a WorkDriver: one work stream and durable pull
// consumer, and the failure subject dead letters are published to (a
// stream must capture it: the failure stream a collector of mode (a)
// drains).
type WorkConfig struct {
	// URL is the NATS server URL (several may be given, comma separated).
	URL string
	// Name appears in the connection name ("quarantine worker NAME").
	Name string
	// Stream is the work stream; it must exist.
	Stream string
	// Subject is the work subject: the consumer's filter and where Send
	// publishes a message naming no queue. It may hold wildcards; Send
	// then needs Message.Queue (a subject matching it).
	Subject string
	// Consumer is the durable pull consumer, created or updated by
	// NewWorkDriver with explicit acks, AckWait, MaxDeliver -1 (the
	// worker's attempt cap decides, not the server) and no BackOff.
	// Default "worker-<Stream>". Workers sharing it share the work.
	Consumer string
	// FailureSubject receives the canonical failure envelopes. A stream
	// must capture it, and the work consumer must not.
	FailureSubject string
	// AckWait of the consumer: default 30 s, between 1 s and 12 h.
	AckWait time.Duration
	// MaxAckPending of the consumer; default 1000.
	MaxAckPending int
	// MaxDelay is the longest retry delay (Limits().MaxDelay): default
	// 24 h, at most 30 days.
	MaxDelay time.Duration
	// RejectNak makes Reject a Nak (redelivered at once, with no cap but
	// the consumer's MaxDeliver). By default Reject is Term: the server
	// forgets the message, as RabbitMQ drops a rejection without a
	// dead-letter exchange.
	RejectNak bool
	// StateBucket is the JetStream key-value bucket that carries the
	// worker's retry headers across a NakWithDelay (see WorkDriver),
	// created or updated by NewWorkDriver. Default
	// "quarantine-worker-<Stream>-<Consumer>" (characters other than
	// letters, digits, '-' and '_' become '_').
	StateBucket string
}

var bucketName = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// Validate checks c; errors are EINVALID *quarantine.Error values naming
// the field at fault.
func (c *WorkConfig) Validate() error {
	if err := validateURL(c.URL); err != nil {
		return err
	}
	if err := validateName("stream", "stream", c.Stream); err != nil {
		return err
	}
	if c.Consumer != "" {
		if err := validateName("consumer", "consumer", c.Consumer); err != nil {
			return err
		}
	}
	if !validSubject(c.Subject) {
		return quarantine.FieldErrorf(quarantine.EINVALID, "subject", "%q is not a NATS subject", quarantine.Clip(c.Subject))
	}
	if !validSubject(c.FailureSubject) || strings.ContainsAny(c.FailureSubject, "*>") {
		return quarantine.FieldErrorf(quarantine.EINVALID, "failure_subject", "%q is not a NATS subject without wildcards", quarantine.Clip(c.FailureSubject))
	}
	if subjectMatches(c.Subject, c.FailureSubject) {
		return quarantine.FieldErrorf(quarantine.EINVALID, "failure_subject",
			"the failure subject %q is on the work consumer's subject %q: dead letters would be worked again", quarantine.Clip(c.FailureSubject), quarantine.Clip(c.Subject))
	}
	if c.AckWait != 0 && (c.AckWait < MinAckWait || c.AckWait > MaxAckWait) {
		return quarantine.FieldErrorf(quarantine.EINVALID, "ack_wait", "ack_wait must be between %s and %s", MinAckWait, MaxAckWait)
	}
	if c.MaxAckPending < 0 {
		return quarantine.FieldErrorf(quarantine.EINVALID, "max_ack_pending", "max_ack_pending must not be negative")
	}
	if c.MaxDelay < 0 || c.MaxDelay > 30*24*time.Hour {
		return quarantine.FieldErrorf(quarantine.EINVALID, "max_delay", "max_delay must be between 0 (default 24h) and 720h")
	}
	if c.StateBucket != "" && (len(c.StateBucket) > 255 || !bucketName.MatchString(c.StateBucket)) {
		return quarantine.FieldErrorf(quarantine.EINVALID, "state_bucket", "%q is not a key-value bucket name (letters, digits, '-', '_')", quarantine.Clip(c.StateBucket))
	}
	return nil
}

func (c WorkConfig) withDefaults() WorkConfig {
	defaults.Zero(&c.Consumer, "worker-"+c.Stream)
	defaults.Zero(&c.AckWait, DefaultWorkAckWait)
	defaults.Zero(&c.MaxAckPending, DefaultWorkMaxAckPending)
	defaults.Zero(&c.MaxDelay, DefaultWorkMaxDelay)
	if c.StateBucket == "" {
		c.StateBucket = strings.Map(func(r rune) rune {
			if r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
				return r
			}
			return '_'
		}, "quarantine-worker-"+c.Stream+"-"+c.Consumer)
	}
	return c
}

// WorkDriver is a worker.Driver over a JetStream durable pull consumer and
// a worker.Sender to its stream.
//
// Settlements:
//
//   - Ack: a double ack (the server confirms it).
//   - Retry(d, delay): the worker's own headers of d
//     (x-quarantine-attempts, -delivered, -first-failed-at, -not-before)
//     are put in the state bucket (WorkConfig.StateBucket) under the
//     message's stream sequence, then NakWithDelay(delay), confirmed by
//     the server. The stream keeps the original message, whose headers
//     cannot change; Receive puts the stored ones back on a redelivery
//     (NumDelivered above 1), so the worker counts attempts as on any
//     driver: the consumer's NumDelivered goes on across a retry
//     (Limits().RetryKeepsCount), every delivery that never settled
//     counts, and the retries the worker does not count (a claim held
//     elsewhere, a shutdown, a claim store outage) are not counted.
//     Republishing the updated message instead would need a delayed
//     publish, which JetStream 2.9 and 2.10 lack. A state that cannot be
//     stored fails the Retry (the delivery comes back after AckWait); one
//     that cannot be read is logged and the delivery counted by
//     NumDelivered alone (more attempts, never fewer). The state is
//     deleted when the message is acked, dead-lettered or terminated, and
//     expires WorkStateTTL after its last retry.
//   - DeadLetter(d, envelope): publish the envelope to FailureSubject with
//     Nats-Msg-Id "dlq-<stream>-<seq>" and wait for the PubAck, then Term
//     the source (confirmed). A failed publish returns its error and
//     settles nothing. A Term lost after the publish redelivers the job
//     and the envelope is published again with the same Nats-Msg-Id: the
//     failure stream's duplicate window drops it.
//   - Reject: Term (or Nak with WorkConfig.RejectNak).
//   - Extend: InProgress (confirmed); Limits().RenewEvery is AckWait/2.
//
// NewWorkDriver also creates or updates the state bucket, so the
// credentials need the right to manage its stream (KV_<bucket>).
//
// Limits().MaxDelay is WorkConfig.MaxDelay (24 h by default); there is no
// DelayStep (NakWithDelay takes nanoseconds). The consumer's BackOff is
// not used: the worker picks every delay.
//
// Every settlement is sent as a request on the message's ack subject, so
// an error means the server did not confirm it (the delivery is then left
// to redelivery after AckWait). A delivery fetched while Receive's context
// ended is nakked back at once, recorded in the state bucket as returned
// unseen so that it costs no attempt although NumDelivered counts it.
// Settling a delivery whose connection was closed fails.
// It is safe for concurrent use.
type WorkDriver struct {
	cfg  WorkConfig
	log  *slog.Logger
	poll time.Duration

	nc *nats.Conn
	js jetstream.JetStream

	mu    sync.Mutex
	cons  jetstream.Consumer // nil: set up again on the next Receive
	state jetstream.KeyValue // nil: set up again when needed
}

// retryState is what the state bucket holds for one message: the
// worker's headers as of its last retry, and the message's stream time
// (a state left by another message of the same sequence, after the
// stream was recreated, is ignored).
type retryState struct {
	Sent    int64             `json:"sent"`
	Headers map[string]string `json:"headers"`
}

// stateHeaders are the worker's headers the state bucket carries.
var stateHeaders = []string{worker.HeaderAttempts, worker.HeaderDelivered, worker.HeaderFirstFailedAt, worker.HeaderNotBefore}

var (
	_ worker.Driver = (*WorkDriver)(nil)
	_ worker.Sender = (*WorkDriver)(nil)
)

// Ack bodies of the JetStream protocol.
var (
	ackTerm     = []byte("+TERM")
	ackProgress = []byte("+WPI")
	ackNak      = []byte("-NAK")
)

// NewWorkDriver validates cfg, connects (the client then reconnects by
// itself), checks that the work stream exists and a stream captures the
// failure subject, and creates or updates the durable consumer.
func NewWorkDriver(cfg WorkConfig, logger *slog.Logger) (*WorkDriver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	log := logger.With("component", "nats worker driver", "stream", cfg.Stream, "consumer", cfg.Consumer)
	nc, js, err := connectJetStream(cfg.URL, "quarantine worker "+cfg.Name, log)
	if err != nil {
		return nil, err
	}
	w := &WorkDriver{cfg: cfg, log: log, poll: defaultWorkPoll, nc: nc, js: js}
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	if _, err := js.StreamNameBySubject(ctx, cfg.FailureSubject); err != nil {
		nc.Close()
		return nil, unavailable(err, "nats: no stream captures the failure subject %q", cfg.FailureSubject)
	}
	if _, err := w.consumer(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	if _, err := w.stateBucket(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	log.Info("connected to NATS", "url", redacturl.List(cfg.URL), "subject", cfg.Subject)
	return w, nil
}

// Close closes the connection: deliveries not settled are redelivered
// after AckWait.
func (w *WorkDriver) Close() error {
	w.nc.Close()
	return nil
}

// Consumer returns the durable consumer's name.
func (w *WorkDriver) Consumer() string { return w.cfg.Consumer }

// consumer returns the consumer, creating or updating it first if needed.
func (w *WorkDriver) consumer(ctx context.Context) (jetstream.Consumer, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cons != nil {
		return w.cons, nil
	}
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	cons, err := w.js.CreateOrUpdateConsumer(ctx, w.cfg.Stream, jetstream.ConsumerConfig{
		Durable:       w.cfg.Consumer,
		Description:   "quarantine worker",
		FilterSubject: w.cfg.Subject,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       w.cfg.AckWait,
		MaxDeliver:    -1, // the worker's attempt cap dead-letters, not the server
		MaxAckPending: w.cfg.MaxAckPending,
	})
	if err != nil {
		return nil, unavailable(err, "nats: cannot set up consumer %q on stream %q", w.cfg.Consumer, w.cfg.Stream)
	}
	w.cons = cons
	return cons, nil
}

// stateBucket returns the retry state bucket, creating or updating it
// first if needed.
func (w *WorkDriver) stateBucket(ctx context.Context) (jetstream.KeyValue, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state != nil {
		return w.state, nil
	}
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	kv, err := w.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: w.cfg.StateBucket, Description: "quarantine worker: retry state of consumer " + w.cfg.Consumer,
		History: 1, TTL: WorkStateTTL,
	})
	if err != nil {
		return nil, unavailable(err, "nats: cannot set up the key-value bucket %q", w.cfg.StateBucket)
	}
	w.state = kv
	return kv, nil
}

// stateKey is the state bucket's key of m: its stream sequence.
func stateKey(m jetstream.Msg) (key string, md *jetstream.MsgMetadata, ok bool) {
	md, err := m.Metadata()
	if err != nil {
		return "", nil, false
	}
	return strconv.FormatUint(md.Sequence.Stream, 10), md, true
}

// loadState puts the worker's headers stored at m's last retry back on d.
func (w *WorkDriver) loadState(ctx context.Context, m jetstream.Msg, d *worker.Delivery) {
	key, md, ok := stateKey(m)
	if !ok || md.NumDelivered <= 1 {
		return
	}
	kv, err := w.stateBucket(ctx)
	var e jetstream.KeyValueEntry
	if err == nil {
		e, err = kv.Get(ctx, key)
	}
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return
	}
	var st retryState
	if err == nil {
		err = json.Unmarshal(e.Value(), &st)
	}
	if err != nil {
		w.log.Warn("cannot read the retry state of a delivery: counting it by NumDelivered", "delivery", d.ID, "err", err)
		return
	}
	if st.Sent != md.Timestamp.UnixNano() {
		return
	}
	for _, h := range stateHeaders {
		for k := range d.Headers {
			if strings.EqualFold(k, h) {
				delete(d.Headers, k)
			}
		}
		if v := st.Headers[h]; v != "" {
			d.Headers[h] = v
		}
	}
}

// saveState stores d's worker headers for its next delivery.
func (w *WorkDriver) saveState(ctx context.Context, m jetstream.Msg, d *worker.Delivery) error {
	key, md, ok := stateKey(m)
	if !ok {
		return fmt.Errorf("nats: delivery %s has no JetStream metadata", d.ID)
	}
	st := retryState{Sent: md.Timestamp.UnixNano(), Headers: map[string]string{}}
	for _, h := range stateHeaders {
		if v := d.Header(h); v != "" {
			st.Headers[h] = v
		}
	}
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	kv, err := w.stateBucket(ctx)
	if err != nil {
		return err
	}
	if _, err := kv.Put(ctx, key, b); err != nil {
		w.dropState()
		return unavailable(err, "nats: the retry state of delivery %s was not stored", d.ID)
	}
	return nil
}

// forgetState deletes m's state once m is settled for good (best effort:
// the state expires anyway).
func (w *WorkDriver) forgetState(ctx context.Context, m jetstream.Msg) {
	key, md, ok := stateKey(m)
	if !ok || md.NumDelivered <= 1 {
		return
	}
	kv, err := w.stateBucket(ctx)
	if err == nil {
		err = kv.Delete(ctx, key)
	}
	if err != nil {
		w.log.Warn("cannot delete the retry state of a settled message (it expires by itself)", "seq", key, "err", err)
	}
}

func (w *WorkDriver) dropState() {
	w.mu.Lock()
	w.state = nil
	w.mu.Unlock()
}

func (w *WorkDriver) lost() {
	w.mu.Lock()
	w.cons = nil
	w.mu.Unlock()
}

// Receive implements worker.Driver: it pulls up to limit messages,
// waiting for the first in pull requests of at most a few seconds each
// (and at most half the AckWait).
func (w *WorkDriver) Receive(ctx context.Context, limit int) ([]*worker.Delivery, error) {
	limit = min(max(limit, 1), w.cfg.MaxAckPending)
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := waitConnected(ctx, w.nc, 2*w.poll); err != nil {
			return nil, err
		}
		cons, err := w.consumer(ctx)
		if err != nil {
			return nil, err
		}
		wait := min(w.poll, w.cfg.AckWait/2)
		if dl, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(dl))
		}
		if wait < time.Millisecond {
			return nil, context.DeadlineExceeded
		}
		// What is there now, up to limit; else wait for one (a pull
		// request for more would hold the first until the batch fills or
		// the wait ends, maybe past AckWait), then take what else is there.
		msgs, err := w.pull(ctx, cons, limit, 0)
		if err == nil && len(msgs) == 0 {
			msgs, err = w.pull(ctx, cons, 1, wait)
			if err == nil && len(msgs) == 1 && limit > 1 {
				var more []jetstream.Msg
				more, err = w.pull(ctx, cons, limit-1, 0)
				msgs = append(msgs, more...)
			}
		}
		ds := make([]*worker.Delivery, 0, len(msgs))
		for _, m := range msgs {
			ds = append(ds, w.delivery(m))
		}
		if err != nil || len(ds) > 0 {
			return ds, err
		}
	}
}

// pull sends one pull request for up to n messages and reads it to its
// end (or until ctx ends: late arrivals are then nakked back by returnLate);
// wait 0 asks only for what is available now.
func (w *WorkDriver) pull(ctx context.Context, cons jetstream.Consumer, n int, wait time.Duration) ([]jetstream.Msg, error) {
	var (
		b   jetstream.MessageBatch
		err error
	)
	if wait <= 0 {
		b, err = cons.FetchNoWait(n)
	} else {
		b, err = cons.Fetch(n, jetstream.FetchMaxWait(wait))
	}
	if err != nil {
		w.lost()
		return nil, unavailable(err, "nats: pull from consumer %q failed", w.cfg.Consumer)
	}
	var out []jetstream.Msg
	ch := b.Messages()
	for {
		select {
		case m, ok := <-ch:
			if !ok {
				if err := b.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
					w.lost()
					return out, unavailable(err, "nats: pull from consumer %q failed", w.cfg.Consumer)
				}
				return out, nil
			}
			out = append(out, m)
		case <-ctx.Done():
			go w.returnLate(ch)
			return out, ctx.Err()
		}
	}
}

// returnLate naks back whatever still arrives on an abandoned pull
// request. The worker never saw those deliveries, so each is recorded in
// the state bucket as settled without an attempt (its delivery count is
// the new HeaderDelivered; the attempts done stay): the next delivery's
// attempt is the one this would have had. Should that fail, the delivery
// counts as one that never settled.
func (w *WorkDriver) returnLate(ch <-chan jetstream.Msg) {
	for m := range ch {
		d := w.delivery(m)
		if h, err := strconv.Atoi(d.Header(worker.HeaderAttempts)); err == nil && h >= 0 {
			if r, err := strconv.Atoi(d.Header(worker.HeaderDelivered)); err == nil && r > 0 {
				d.Headers[worker.HeaderDelivered] = strconv.Itoa(r + 1)
			}
		} else if d.Attempt > 0 {
			d.Headers[worker.HeaderAttempts] = strconv.Itoa(d.Attempt - 1)
			d.Headers[worker.HeaderDelivered] = strconv.Itoa(d.Attempt)
		}
		ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
		if err := w.saveState(ctx, m, d); err != nil {
			w.log.Warn("cannot record a late delivery returned unseen: it will count as an attempt", "delivery", d.ID, "err", err)
		}
		cancel()
		_ = m.Nak()
	}
}

// delivery fills a worker.Delivery from m (see worker/doc.go, "Writing a
// Driver").
func (w *WorkDriver) delivery(m jetstream.Msg) *worker.Delivery {
	sm := toStreamMsg(m)
	d := &worker.Delivery{
		ID:          messageID(sm),
		Queue:       m.Subject(),
		JobName:     headerValue(m.Headers(), worker.HeaderJobName),
		Headers:     headerMap(m.Headers()),
		Body:        m.Data(),
		ContentType: headerValue(m.Headers(), "Content-Type"),
		EnqueuedAt:  sm.Time,
		Ref:         m,
	}
	if d.Headers == nil {
		d.Headers = map[string]string{}
	}
	if md, err := m.Metadata(); err == nil {
		d.Attempt = int(md.NumDelivered)
	}
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	w.loadState(ctx, m, d)
	return d
}

func msgOf(d *worker.Delivery) (jetstream.Msg, error) {
	m, ok := d.Ref.(jetstream.Msg)
	if !ok || m == nil {
		return nil, fmt.Errorf("nats: delivery %s was not received by this driver", d.ID)
	}
	return m, nil
}

// settle sends an ack body to m's reply subject as a request: the server
// answers once the consumer applied it (as DoubleAck does for +ACK).
func (w *WorkDriver) settle(ctx context.Context, d *worker.Delivery, what string, body []byte) error {
	m, err := msgOf(d)
	if err != nil {
		return err
	}
	if m.Reply() == "" {
		return fmt.Errorf("nats: %s of delivery %s: the message has no reply subject", what, d.ID)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, apiTimeout)
		defer cancel()
	}
	if _, err := w.nc.RequestWithContext(ctx, m.Reply(), body); err != nil {
		return unavailable(err, "nats: %s of delivery %s was not confirmed", what, d.ID)
	}
	return nil
}

// Ack implements worker.Driver (a double ack).
func (w *WorkDriver) Ack(ctx context.Context, d *worker.Delivery) error {
	m, err := msgOf(d)
	if err != nil {
		return err
	}
	if err := m.DoubleAck(ctx); err != nil {
		return unavailable(err, "nats: ack of delivery %s was not confirmed", d.ID)
	}
	w.forgetState(ctx, m)
	return nil
}

// Retry implements worker.Driver: d's worker headers go to the state
// bucket (see WorkDriver), then NakWithDelay(delay), confirmed.
func (w *WorkDriver) Retry(ctx context.Context, d *worker.Delivery, delay time.Duration) error {
	if delay > w.cfg.MaxDelay {
		return fmt.Errorf("nats: retry delay %s of delivery %s is above the driver's maximum of %s", delay, d.ID, w.cfg.MaxDelay)
	}
	m, err := msgOf(d)
	if err != nil {
		return err
	}
	if err := w.saveState(ctx, m, d); err != nil {
		return err
	}
	body := ackNak
	if delay > 0 {
		body = fmt.Appendf(nil, "%s {\"delay\": %d}", ackNak, delay.Nanoseconds())
	}
	return w.settle(ctx, d, "nak", body)
}

// DeadLetter implements worker.Driver: the envelope is published to the
// failure subject and confirmed, then the source is terminated.
func (w *WorkDriver) DeadLetter(ctx context.Context, d *worker.Delivery, envelope []byte) error {
	m, err := msgOf(d)
	if err != nil {
		return err
	}
	id := "dlq-" + d.ID
	if md, err := m.Metadata(); err == nil {
		id = fmt.Sprintf("dlq-%s-%d", md.Stream, md.Sequence.Stream)
	}
	h := nats.Header{}
	h.Set("Content-Type", "application/json")
	h.Set(nats.MsgIdHdr, id)
	if name := d.JobName; name != "" {
		h[worker.HeaderJobName] = []string{name}
	} else if name := d.Header(worker.HeaderJobName); name != "" {
		h[worker.HeaderJobName] = []string{name}
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, pubAckTimeout)
		defer cancel()
	}
	if _, err := w.js.PublishMsg(ctx, &nats.Msg{Subject: w.cfg.FailureSubject, Header: h, Data: envelope}); err != nil {
		// A duplicate is a PubAck, not an error: an earlier attempt's
		// envelope is in the failure stream already.
		return unavailable(err, "nats: the failure envelope of delivery %s was not confirmed on %q", d.ID, w.cfg.FailureSubject)
	}
	if err := w.settle(ctx, d, "term", ackTerm); err != nil {
		return err
	}
	w.forgetState(ctx, m)
	return nil
}

// Reject implements worker.Driver: Term, or Nak with RejectNak.
func (w *WorkDriver) Reject(ctx context.Context, d *worker.Delivery) error {
	if w.cfg.RejectNak {
		return w.settle(ctx, d, "nak", ackNak)
	}
	if err := w.settle(ctx, d, "term", ackTerm); err != nil {
		return err
	}
	if m, err := msgOf(d); err == nil {
		w.forgetState(ctx, m)
	}
	return nil
}

// Extend implements worker.Driver: InProgress, confirmed by the server.
func (w *WorkDriver) Extend(ctx context.Context, d *worker.Delivery) error {
	return w.settle(ctx, d, "in-progress", ackProgress)
}

// Limits implements worker.Driver.
func (w *WorkDriver) Limits() worker.Limits {
	return worker.Limits{MaxDelay: w.cfg.MaxDelay, RenewEvery: w.cfg.AckWait / 2, RetryKeepsCount: true}
}

// Send implements worker.Sender: a JetStream publish to m.Queue (default
// the work subject; it must match it), confirmed by its PubAck, with
// Nats-Msg-Id = m.ID so that the stream's duplicate window drops a resend.
// A duplicate PubAck is a success. Errors are *quarantine.Error values:
// EINVALID for a subject outside the work subject or a refused message,
// ENOTFOUND when no stream captures it, EUNAVAILABLE otherwise.
func (w *WorkDriver) Send(ctx context.Context, m *worker.Message) error {
	subject := m.Queue
	if subject == "" {
		subject = w.cfg.Subject
	}
	if strings.ContainsAny(subject, "*>") || !validSubject(subject) || !subjectMatches(w.cfg.Subject, subject) {
		return quarantine.Errorf(quarantine.EINVALID, "nats: message for %q sent to the work subject %q", quarantine.Clip(subject), quarantine.Clip(w.cfg.Subject))
	}
	h := make(nats.Header, len(m.Headers)+3)
	for k, v := range m.Headers {
		h[k] = []string{v}
	}
	if m.ContentType != "" {
		h["Content-Type"] = []string{m.ContentType}
	}
	if _, ok := m.Headers[worker.HeaderJobName]; !ok && m.JobName != "" {
		h[worker.HeaderJobName] = []string{m.JobName}
	}
	if m.ID != "" {
		h[nats.MsgIdHdr] = []string{m.ID}
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, pubAckTimeout)
		defer cancel()
	}
	_, err := w.js.PublishMsg(ctx, &nats.Msg{Subject: subject, Header: h, Data: m.Body})
	if err == nil {
		return nil
	}
	var ae *jetstream.APIError
	switch {
	case errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, nats.ErrNoResponders):
		return &quarantine.Error{Code: quarantine.ENOTFOUND, Err: err, Message: fmt.Sprintf("nats: no stream captures subject %q", quarantine.Clip(subject))}
	case errors.Is(err, nats.ErrMaxPayload), errors.As(err, &ae) && ae.Code != 503:
		return &quarantine.Error{Code: quarantine.EINVALID, Err: err, Message: fmt.Sprintf("nats: the stream refused the message for %q: %v", quarantine.Clip(subject), err)}
	}
	return unavailable(err, "nats: the message for %q was not confirmed", quarantine.Clip(subject))
}

package kafka

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/broker/internal/workdriver"
	"github.com/quarantine-dev/quarantine/internal/backoff"
	"github.com/quarantine-dev/quarantine/worker"
)

// DefaultWorkMaxDelay is the longest retry delay a WorkDriver takes by
// default.
const DefaultWorkMaxDelay = 24 * time.Hour

// Headers the WorkDriver puts on the records of its retry topic; a
// delivery never shows them.
const (
	// HeaderRetryAt is when a record of the retry topic is due, in Unix
	// milliseconds.
	HeaderRetryAt = "x-kafka-retry-at"
	// HeaderJobID carries the transport id of the first delivery across
	// retries.
	HeaderJobID = "x-kafka-job-id"
)

// WorkConfig configures a WorkDriver: one work topic, its retry topic,
// and the failure topic dead letters are produced to (the topic a
// collector of kind kafka drains).
type WorkConfig struct {
	// Brokers, TLS and SASL are the cluster's, as in Config.
	Brokers []string
	TLS     *TLSConfig
	SASL    *SASLConfig
	// Name names the client ("quarantine-worker-NAME").
	Name string
	// Topic is the work topic: what Send produces to when a message names
	// no queue, and what the driver consumes.
	Topic string
	// Group is the consumer group; default "worker-<Topic>". Workers
	// sharing it share the work.
	Group string
	// RetryTopic holds retries until they are due; default
	// "<Topic>.retry". The driver consumes it too. It must exist (or the
	// cluster create topics on use).
	RetryTopic string
	// FailureTopic receives the canonical failure envelopes.
	FailureTopic string
	// MaxDelay is the longest retry delay (Limits().MaxDelay): default
	// 24 h, at most 30 days.
	MaxDelay time.Duration
	// SessionTimeout is the group session timeout (default 45s): how long
	// the group waits for a member that stopped heartbeating (a killed
	// worker) before its partitions go to the others. Between 1s and 30m;
	// the broker bounds it too (group.min/max.session.timeout.ms).
	SessionTimeout time.Duration
	// InstanceID, when set, makes the driver a static member of the group
	// (KIP-345, group.instance.id), as the collector's instance_id: a
	// worker restarted with the same id, even after a kill -9, takes its
	// partitions back at once instead of after SessionTimeout. Each worker
	// process of the group needs its own stable id (a member joining with
	// an id in use replaces, and fences, the member that had it), such as
	// a StatefulSet's pod name. A static member does not leave the group
	// when it closes: the partitions of a worker stopped for good wait
	// SessionTimeout before they move. Letters, digits, '.', '_' and '-',
	// at most 249 bytes; "" for a dynamic member.
	InstanceID string
}

// Validate checks c; errors are EINVALID *quarantine.Error values naming
// the field at fault.
func (c *WorkConfig) Validate() error {
	conn := Config{Brokers: c.Brokers, Topics: []string{c.Topic}, TLS: c.TLS, SASL: c.SASL}
	if err := conn.Validate(); err != nil {
		if quarantine.ErrorField(err) == "topics[0]" || quarantine.ErrorField(err) == "topics" {
			return quarantine.FieldErrorf(quarantine.EINVALID, "topic", "%s", quarantine.ErrorMessage(err))
		}
		return err
	}
	c2 := c.withDefaults()
	for field, t := range map[string]string{"retry_topic": c2.RetryTopic, "failure_topic": c.FailureTopic} {
		if p := TopicProblem(t); p != "" {
			return quarantine.FieldErrorf(quarantine.EINVALID, field, "%q %s", quarantine.Clip(t), p)
		}
	}
	if c.FailureTopic == c.Topic || c.FailureTopic == c2.RetryTopic {
		return quarantine.FieldErrorf(quarantine.EINVALID, "failure_topic", "the failure topic must be neither the work topic nor the retry topic")
	}
	if c2.RetryTopic == c.Topic {
		return quarantine.FieldErrorf(quarantine.EINVALID, "retry_topic", "the retry topic must not be the work topic")
	}
	if c.MaxDelay < 0 || c.MaxDelay > 30*24*time.Hour {
		return quarantine.FieldErrorf(quarantine.EINVALID, "max_delay", "max_delay must be between 0 (default 24h) and 720h")
	}
	if c.SessionTimeout != 0 && (c.SessionTimeout < time.Second || c.SessionTimeout > 30*time.Minute) {
		return quarantine.FieldErrorf(quarantine.EINVALID, "session_timeout", "session_timeout must be between 1s and 30m, like 45s")
	}
	if c.InstanceID != "" {
		if p := instanceIDProblem(c.InstanceID); p != "" {
			return quarantine.FieldErrorf(quarantine.EINVALID, "instance_id", "instance_id %q %s", quarantine.Clip(c.InstanceID), p)
		}
	}
	return nil
}

func (c WorkConfig) withDefaults() WorkConfig {
	if c.Group == "" {
		c.Group = "worker-" + c.Topic
	}
	if c.RetryTopic == "" {
		c.RetryTopic = c.Topic + ".retry"
	}
	if c.MaxDelay == 0 {
		c.MaxDelay = DefaultWorkMaxDelay
	}
	return c
}

var (
	_ worker.Driver = (*WorkDriver)(nil)
	_ worker.Sender = (*WorkDriver)(nil)
)

// WorkDriver is a worker.Driver over a Kafka work topic, consumed through
// a consumer group with autocommit off: a delivery's offset is committed
// once it is settled, and never past a delivery not settled yet (as the
// collector's Source does), so a worker that dies leaves its unsettled
// deliveries (and those after them on their partition) to be delivered
// again.
//
//   - Ack commits.
//   - Retry produces a copy (same key, body and headers, plus
//     x-kafka-retry-at) to the retry topic, waits for acks=all, then
//     commits. The driver consumes the retry topic too and holds a record
//     until it is due, pausing its partition meanwhile: a delay is a
//     lower bound (a record waits behind the one before it on its retry
//     partition). The count starts again (RetryKeepsCount false): Kafka
//     counts no deliveries, so Delivery.Attempt is 0 and a delivery that
//     never settled is not counted as an attempt.
//   - DeadLetter produces the envelope to the failure topic (keyed like
//     the job), waits for acks=all, then commits.
//   - Reject commits: Kafka has no rejection policy, the record is
//     skipped.
//   - Extend does nothing: a group member keeps its partitions while it
//     heartbeats.
//
// A settlement of a delivery whose partition the group moved to another
// member since is refused (an error): the new owner delivers it again.
type WorkDriver struct {
	cfg WorkConfig
	log *slog.Logger
	cl  *kgo.Client

	ledger   *ledger
	commitMu sync.Mutex
	// poll bounds one wait for records; after it, an idle driver checks
	// that a broker answers.
	pollEvery time.Duration

	mu        sync.Mutex
	waiting   map[tp][]parked // records not handed out yet, per partition (a retry partition whose head is not due is paused)
	closeOnce sync.Once
}

// parked is a record polled and not handed out yet.
type parked struct {
	rec  *kgo.Record
	mark mark
}

// workRef is a Delivery's Ref.
type workRef struct {
	mark mark
	rec  *kgo.Record
}

// NewWorkDriver makes the client and joins the group. It does not wait
// for the cluster. Errors are EINVALID for a configuration that is not
// valid.
func NewWorkDriver(cfg WorkConfig, logger *slog.Logger) (*WorkDriver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.Default()
	}
	cfg = cfg.withDefaults()
	w := &WorkDriver{cfg: cfg, ledger: newLedger(), waiting: map[tp][]parked{}, pollEvery: 5 * time.Second,
		log: logger.With("component", "kafka worker", "topic", cfg.Topic)}
	conn := Config{Brokers: cfg.Brokers, TLS: cfg.TLS, SASL: cfg.SASL, ClientID: "quarantine-worker-" + safeName(cfg.Name)}
	opts := []kgo.Opt{
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topic, cfg.RetryTopic),
		kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsRevoked(w.revoked),
		kgo.OnPartitionsLost(w.lost),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(deliveryTimeout),
		kgo.ProducerLinger(0),
		kgo.FetchMaxWait(time.Second),
		kgo.WithLogger(kgoLogger{w.log}),
	}
	cl, err := conn.newClient("client", append(opts, groupOpts(cfg.InstanceID, cfg.SessionTimeout)...)...)
	if err != nil {
		return nil, err
	}
	w.cl = cl
	return w, nil
}

func (w *WorkDriver) revoked(ctx context.Context, cl *kgo.Client, parts map[string][]int32) {
	w.forget(parts)
	if offsets := w.ledger.drop(parts); len(offsets) > 0 {
		if err := commit(ctx, cl, offsets); err != nil {
			w.log.Warn("could not commit the settled offsets of revoked partitions: their new owner delivers them again", "err", err)
		}
	}
}

func (w *WorkDriver) lost(_ context.Context, _ *kgo.Client, parts map[string][]int32) {
	w.forget(parts)
	w.ledger.drop(parts)
}

// forget drops the waiting retries of partitions that go, and resumes
// them (a later assignment fetches from the committed offset).
func (w *WorkDriver) forget(parts map[string][]int32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for t, ps := range parts {
		for _, p := range ps {
			delete(w.waiting, tp{t, p})
		}
	}
	w.cl.ResumeFetchPartitions(parts)
}

// Close leaves the group, committing what was settled. Unsettled
// deliveries are delivered again to the next owner of their partition.
func (w *WorkDriver) Close() error {
	w.closeOnce.Do(w.cl.Close)
	return nil
}

// Limits: delays up to MaxDelay, no step, no lease, a fresh count per
// retry.
func (w *WorkDriver) Limits() worker.Limits {
	return worker.Limits{MaxDelay: w.cfg.MaxDelay}
}

// Receive returns up to limit deliveries: retries that are due first,
// then new records. It blocks until one is available or ctx ends, or
// returns EUNAVAILABLE when it has waited a while and no broker answers.
func (w *WorkDriver) Receive(ctx context.Context, limit int) ([]*worker.Delivery, error) {
	limit = max(limit, 1)
	for {
		if out, next := w.due(limit); len(out) > 0 {
			return out, nil
		} else if err := w.poll(ctx, limit, next); err != nil {
			return nil, err
		} else if out, _ := w.due(limit); len(out) > 0 {
			return out, nil
		}
	}
}

// due hands out the waiting retries that are due (resuming a partition
// whose waiting list empties) and the new records parked by poll; next is
// when the earliest waiting retry falls due (zero for none).
func (w *WorkDriver) due(limit int) (out []*worker.Delivery, next time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	resume := map[string][]int32{}
	keys := make([]tp, 0, len(w.waiting))
	for k := range w.waiting {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].topic < keys[j].topic || keys[i].topic == keys[j].topic && keys[i].partition < keys[j].partition
	})
	for _, k := range keys {
		q := w.waiting[k]
		for len(q) > 0 && len(out) < limit {
			at := retryAt(q[0].rec)
			if at.After(now) {
				if next.IsZero() || at.Before(next) {
					next = at
				}
				break
			}
			out = append(out, w.delivery(q[0].rec, q[0].mark))
			q = q[1:]
		}
		if len(q) == 0 {
			delete(w.waiting, k)
			if k.topic == w.cfg.RetryTopic {
				resume[k.topic] = append(resume[k.topic], k.partition)
			}
		} else {
			w.waiting[k] = q
		}
	}
	if len(resume) > 0 {
		w.cl.ResumeFetchPartitions(resume)
	}
	return out, next
}

// poll fetches records (until next, when set, or ctx's end) and parks
// them: new records and due retries are handed out by due at once,
// retries not due wait with their partition paused.
func (w *WorkDriver) poll(ctx context.Context, limit int, next time.Time) error {
	until := time.Now().Add(w.pollEvery)
	if !next.IsZero() && next.Before(until) {
		until = next
	}
	pctx, cancel := context.WithDeadline(ctx, until)
	fs := w.cl.PollRecords(pctx, limit)
	cancel()
	if w.cl.Context().Err() != nil {
		return quarantine.Errorf(quarantine.EUNAVAILABLE, "kafka: the work driver is closed")
	}
	recs, ferr := records(fs)
	if len(recs) == 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		if ferr == nil && (next.IsZero() || time.Now().Before(next)) {
			// Idle: say so if no broker answers (the client only retries).
			pctx, cancel := context.WithTimeout(ctx, w.pollEvery)
			err := w.cl.Ping(pctx)
			cancel()
			if err != nil && ctx.Err() == nil {
				return &quarantine.Error{Code: quarantine.EUNAVAILABLE, Err: err, Message: "kafka: no broker answers"}
			}
		}
		if ferr != nil {
			w.log.Warn("fetch failed", "err", ferr)
			if !backoff.Sleep(ctx, time.Second) { // the client retries; do not spin on its error
				return ctx.Err()
			}
		}
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	touched := map[tp]bool{}
	for _, r := range recs {
		// Every record waits in its partition's list, so that a retry not
		// due holds the ones after it; a work record is due at once.
		k := tp{r.Topic, r.Partition}
		w.waiting[k] = append(w.waiting[k], parked{rec: r, mark: w.ledger.handOut(r)})
		touched[k] = true
	}
	pause := map[string][]int32{}
	now := time.Now()
	for k := range touched {
		if k.topic == w.cfg.RetryTopic && retryAt(w.waiting[k][0].rec).After(now) {
			pause[k.topic] = append(pause[k.topic], k.partition)
		}
	}
	if len(pause) > 0 {
		w.cl.PauseFetchPartitions(pause)
	}
	return nil
}

// retryAt is when a record is due: x-kafka-retry-at, or now.
func retryAt(r *kgo.Record) time.Time {
	for _, h := range r.Headers {
		if h.Key == HeaderRetryAt {
			if ms, err := strconv.ParseInt(string(h.Value), 10, 64); err == nil {
				return time.UnixMilli(ms)
			}
		}
	}
	return time.Time{}
}

// delivery fills a worker.Delivery from r.
func (w *WorkDriver) delivery(r *kgo.Record, m mark) *worker.Delivery {
	d := &worker.Delivery{
		ID:      coordinates(r.Topic, r.Partition, r.Offset),
		Queue:   w.cfg.Topic,
		Headers: make(map[string]string, len(r.Headers)),
		Body:    r.Value,
		Ref:     &workRef{mark: m, rec: r},
	}
	for _, h := range r.Headers {
		switch {
		case h.Key == HeaderRetryAt:
		case h.Key == HeaderJobID:
			d.ID = string(h.Value)
		case strings.EqualFold(h.Key, HeaderContentType):
			d.ContentType = string(h.Value)
		default:
			d.Headers[h.Key] = string(h.Value)
		}
	}
	if r.Topic == w.cfg.Topic {
		d.EnqueuedAt = r.Timestamp
	}
	return d
}

func refOf(d *worker.Delivery) (*workRef, error) { return workdriver.Ref[workRef](d, "kafka") }

// settle commits d's offset once every delivery before it on its
// partition is settled too. It refuses a delivery whose partition was
// revoked since.
func (w *WorkDriver) settle(ctx context.Context, r *workRef) error {
	w.commitMu.Lock()
	defer w.commitMu.Unlock()
	if !w.ledger.current(r.mark) {
		return quarantine.Errorf(quarantine.EUNAVAILABLE, "kafka: partition %d of %s was reassigned: its new owner delivers the record again", r.mark.tp.partition, r.mark.tp.topic)
	}
	offsets := w.ledger.stored([]mark{r.mark})
	if len(offsets) == 0 {
		return nil
	}
	if err := commit(ctx, w.cl, offsets); err != nil {
		return &quarantine.Error{Code: quarantine.EUNAVAILABLE, Err: err, Message: "kafka: offset commit not confirmed"}
	}
	w.ledger.committed(offsets)
	return nil
}

// Ack settles d as done.
func (w *WorkDriver) Ack(ctx context.Context, d *worker.Delivery) error {
	r, err := refOf(d)
	if err != nil {
		return err
	}
	return w.settle(ctx, r)
}

// Reject skips d: Kafka has no rejection policy.
func (w *WorkDriver) Reject(ctx context.Context, d *worker.Delivery) error { return w.Ack(ctx, d) }

// Extend does nothing: partitions stay with a member that heartbeats.
func (w *WorkDriver) Extend(context.Context, *worker.Delivery) error { return nil }

// Retry produces d (its key, body and d.Headers) to the retry topic, due
// after delay, then settles d.
func (w *WorkDriver) Retry(ctx context.Context, d *worker.Delivery, delay time.Duration) error {
	r, err := refOf(d)
	if err != nil {
		return err
	}
	if !w.ledger.current(r.mark) {
		return quarantine.Errorf(quarantine.EUNAVAILABLE, "kafka: the partition was reassigned: its new owner delivers the record again")
	}
	rec := &kgo.Record{Topic: w.cfg.RetryTopic, Key: r.rec.Key, Value: d.Body}
	if rec.Value == nil {
		rec.Value = []byte{}
	}
	rec.Headers = sortedHeaders(d.Headers)
	if d.ContentType != "" {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: HeaderContentType, Value: []byte(d.ContentType)})
	}
	rec.Headers = append(rec.Headers,
		kgo.RecordHeader{Key: HeaderJobID, Value: []byte(d.ID)},
		kgo.RecordHeader{Key: HeaderRetryAt, Value: []byte(strconv.FormatInt(ceilMilli(time.Now().Add(delay)), 10))})
	if err := w.produce(ctx, rec); err != nil {
		return err
	}
	return w.settle(ctx, r)
}

// DeadLetter produces envelope to the failure topic (keyed like the job),
// waits for acks=all, then settles d.
func (w *WorkDriver) DeadLetter(ctx context.Context, d *worker.Delivery, envelope []byte) error {
	r, err := refOf(d)
	if err != nil {
		return err
	}
	rec := &kgo.Record{Topic: w.cfg.FailureTopic, Key: r.rec.Key, Value: envelope,
		Headers: []kgo.RecordHeader{{Key: HeaderContentType, Value: []byte("application/json")}}}
	if err := w.produce(ctx, rec); err != nil {
		return err
	}
	return w.settle(ctx, r)
}

func (w *WorkDriver) produce(ctx context.Context, rec *kgo.Record) error {
	if err := w.cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return &quarantine.Error{Code: quarantine.EUNAVAILABLE, Err: err, Message: fmt.Sprintf("kafka: the record for %s was not acknowledged", rec.Topic)}
	}
	return nil
}

// Send produces a job message to m.Queue (default the work topic), keyed
// by its idempotency key, and waits for acks=all.
func (w *WorkDriver) Send(ctx context.Context, m *worker.Message) error {
	h := workdriver.Headers(m, 1)
	rec := &kgo.Record{Topic: cmp.Or(m.Queue, w.cfg.Topic), Value: m.Body, Headers: sortedHeaders(h)}
	if k := h[worker.HeaderIdempotencyKey]; k != "" {
		rec.Key = []byte(k)
	}
	if m.ContentType != "" {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: HeaderContentType, Value: []byte(m.ContentType)})
	}
	if m.ID != "" {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: HeaderJobID, Value: []byte(m.ID)})
	}
	return w.produce(ctx, rec)
}

func sortedHeaders(h map[string]string) []kgo.RecordHeader {
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	sort.Strings(names)
	out := make([]kgo.RecordHeader, 0, len(names)+3)
	for _, k := range names {
		out = append(out, kgo.RecordHeader{Key: k, Value: []byte(h[k])})
	}
	return out
}

// ceilMilli is t in Unix milliseconds, rounded up: a delay is a lower
// bound, and rounding down would make a retry due up to a millisecond
// early.
func ceilMilli(t time.Time) int64 {
	ms := t.UnixMilli()
	if t.After(time.UnixMilli(ms)) {
		ms++
	}
	return ms
}

package kafka

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/broker/internal/publisher"
	"github.com/quarantine-dev/quarantine/broker/internal/refusal"
	"github.com/quarantine-dev/quarantine/replay"
)

var _ replay.Publisher = (*Publisher)(nil)

// deliveryTimeout bounds how long one record may wait for its
// acknowledgement, retries included; after it the item is pending.
const deliveryTimeout = 30 * time.Second

// HeaderContentType carries the content type of a replayed record.
const HeaderContentType = "content-type"

// Publisher produces replayed messages to Kafka: each Outgoing to the
// topic Outgoing.Queue, with an idempotent producer and acks=all, keyed by
// the original record key (x-kafka-key or x-kafka-key-base64 of the
// quarantined message), so that per-key order and partitioning hold.
//
// The headers are the Outgoing's less the dead-letter bookkeeping
// (__connect.errors.*, kafka_dlt-*, __streams.errors.*, retry_topic-*,
// x-kafka-*), plus content-type. A produce error the client reports as
// retriable is ItemPending, Refused when the broker answered it (not
// enough replicas, a leader moving: the client retries those itself until
// the delivery timeout, 30 s, and the publisher counts the broker's
// produce answers meanwhile to tell them from an unreachable cluster); an
// unknown topic, a record too large,
// an authorization failure and every other error the broker answers is
// ItemFailed; a timeout, an unreachable cluster or the context's end is
// ItemPending. Safe for concurrent use.
type Publisher struct {
	cfg  Config
	name string
	log  *slog.Logger
	// timeout bounds one record's delivery (deliveryTimeout).
	timeout time.Duration

	// answered counts produce responses read from a broker: a record that
	// timed out while it grew was refused (the broker answered and
	// did not take it), not stranded by an unreachable cluster.
	answered refusal.Counter

	conn lazyClient
}

// OnBrokerRead implements kgo.HookBrokerRead: it counts produce
// responses read.
func (p *Publisher) OnBrokerRead(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == int16(kmsg.Produce) && err == nil {
		p.answered.Add()
	}
}

// NewPublisher returns a publisher to the cluster of cfg (only the
// connection keys are used). It dials lazily, on the first Publish.
// Errors are EINVALID for a configuration that is not valid.
func NewPublisher(cfg Config, name string, logger *slog.Logger) (*Publisher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults(name)
	return &Publisher{cfg: cfg, name: name, timeout: deliveryTimeout,
		log: publisher.Log(logger, "kafka", name)}, nil
}

func (p *Publisher) client() (*kgo.Client, error) {
	return p.conn.get("publisher", func() (*kgo.Client, error) {
		return p.cfg.newClient("producer",
			kgo.RequiredAcks(kgo.AllISRAcks()), // idempotent writes are the default and need acks=all
			kgo.RecordDeliveryTimeout(p.timeout),
			kgo.ProducerLinger(0),
			kgo.WithLogger(kgoLogger{p.log}),
			kgo.WithHooks(p),
		)
	})
}

// Publish implements replay.Publisher. Errors in Results are
// *quarantine.Error values: ENOTFOUND for a topic that does not exist,
// EINVALID for a record the broker refuses for good, EUNAVAILABLE for a
// retriable error, a timeout or a cluster that cannot be reached.
func (p *Publisher) Publish(ctx context.Context, msgs []replay.Outgoing) []replay.Result {
	res := make([]replay.Result, len(msgs))
	if len(msgs) == 0 {
		return res
	}
	cl, err := p.client()
	if err != nil {
		for i := range res {
			res[i] = replay.Result{Outcome: quarantine.ItemPending, Err: err}
		}
		return res
	}
	mark := p.answered.Mark()
	var wg sync.WaitGroup
	for i := range msgs {
		if p := TopicProblem(msgs[i].Queue); p != "" {
			res[i] = replay.Result{Outcome: quarantine.ItemFailed, Err: quarantine.Errorf(quarantine.EINVALID,
				"kafka: the destination %q %s", quarantine.Clip(msgs[i].Queue), p)}
			continue
		}
		wg.Add(1)
		cl.Produce(ctx, toRecord(&msgs[i]), func(_ *kgo.Record, err error) {
			defer wg.Done()
			res[i] = p.outcome(ctx, err, msgs[i].Queue)
		})
	}
	wg.Wait()
	// The client retries retriable errors itself, and reports only that
	// time ran out: a broker that answered meanwhile refused.
	p.answered.Refused(ctx, mark, res, func(e error) bool {
		return errors.Is(e, kgo.ErrRecordTimeout) || errors.Is(e, kgo.ErrRecordRetries)
	})
	return res
}

// toRecord maps an Outgoing onto a Kafka record: the original key, the
// headers less the dead-letter bookkeeping (sorted by name), the content
// type, and the payload as value.
func toRecord(o *replay.Outgoing) *kgo.Record {
	r := &kgo.Record{Topic: o.Queue, Value: o.Payload}
	if r.Value == nil {
		r.Value = []byte{}
	}
	names, hasCT := publisher.Headers(o, func(k, v string) bool {
		switch k {
		case HeaderKey:
			r.Key = []byte(v)
			return true
		case HeaderKeyBase64:
			if b, err := base64.StdEncoding.DecodeString(v); err == nil {
				r.Key = b
			}
			return true
		}
		return Bookkeeping(k)
	})
	sort.Strings(names)
	for _, k := range names {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: k, Value: []byte(o.Headers[k])})
	}
	if !hasCT && o.ContentType != "" {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: HeaderContentType, Value: []byte(o.ContentType)})
	}
	if o.IdempotencyKey != "" && !hasHeader(r.Headers, replay.HeaderIdempotencyKey) {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: replay.HeaderIdempotencyKey, Value: []byte(o.IdempotencyKey)})
	}
	return r
}

// deadLetterHeaders are the prefixes of the headers Kafka Connect, Spring
// Kafka and Kafka Streams add when they dead-letter a record. No replay
// copies them, whatever broker it goes to: init registers them with the
// replay engine (replay.Prepare drops them).
var deadLetterHeaders = []string{connectPrefix, springPrefix, springRetryPrefix, streamsPrefix}

func init() { replay.RegisterBookkeeping(deadLetterHeaders...) }

// Bookkeeping reports whether a header was added by a dead-lettering
// (Connect, Spring, Streams) or by the collector (x-kafka-*), and is not
// replayed. The collector's x-kafka-* headers reach the publisher, which
// takes the record key from x-kafka-key (or x-kafka-key-base64).
func Bookkeeping(name string) bool {
	if strings.HasPrefix(name, "x-kafka-") {
		return true
	}
	for _, p := range deadLetterHeaders {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

func hasHeader(hs []kgo.RecordHeader, name string) bool {
	for _, h := range hs {
		if strings.EqualFold(h.Key, name) {
			return true
		}
	}
	return false
}

// outcome classifies a produce result.
func (p *Publisher) outcome(ctx context.Context, err error, topic string) replay.Result {
	if err == nil {
		return replay.Result{Outcome: quarantine.ItemPublished}
	}
	var ke *kerr.Error
	switch {
	case errors.Is(err, kerr.UnknownTopicOrPartition):
		return replay.Result{Outcome: quarantine.ItemFailed, Err: &quarantine.Error{Code: quarantine.ENOTFOUND, Err: err,
			Message: fmt.Sprintf("kafka: topic %q does not exist", quarantine.Clip(topic))}}
	case errors.As(err, &ke) && !ke.Retriable:
		return replay.Result{Outcome: quarantine.ItemFailed, Err: &quarantine.Error{Code: quarantine.EINVALID, Err: err,
			Message: fmt.Sprintf("kafka: the broker refused the record for topic %q: %s", quarantine.Clip(topic), ke.Message)}}
	case errors.As(err, &ke):
		// The broker answered that it cannot take the record now: offered
		// again, a bounded number of times.
		r := p.pending(ctx, err, topic)
		r.Refused = true
		return r
	}
	return p.pending(ctx, err, topic)
}

func (p *Publisher) pending(ctx context.Context, err error, topic string) replay.Result {
	if ctx.Err() != nil {
		err = ctx.Err()
	}
	return replay.Result{Outcome: quarantine.ItemPending, Err: &quarantine.Error{Code: quarantine.EUNAVAILABLE, Err: err,
		Message: fmt.Sprintf("kafka: the record for topic %q was not acknowledged: %v", quarantine.Clip(topic), err)}}
}

// Close closes the client, flushing nothing: Publish waits for its own
// records. Publish fails (pending) afterwards.
func (p *Publisher) Close() error {
	if cl := p.conn.close(true); cl != nil {
		cl.Close()
	}
	return nil
}

package sqs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/broker/internal/publisher"
	"github.com/quarantine-dev/quarantine/replay"
)

var _ replay.Publisher = (*Publisher)(nil)

// Limits of SQS that shape a SendMessageBatch call.
const (
	maxBatchEntries = 10        // entries per SendMessageBatch
	maxBatchBytes   = 256 << 10 // total size of a batch's bodies and attributes
	maxAttributes   = 10        // message attributes per message
	publishParallel = 4         // concurrent SendMessageBatch calls of one Publish (standard queues)
)

// Publisher publishes replayed messages to SQS with SendMessageBatch.
//
// Outgoing.Queue is a queue name, resolved once with GetQueueUrl and
// cached. The headers travel as String message attributes, at most ten: the
// replay headers and the idempotency key first, then the others by name;
// the rest, and names or values SQS does not accept, are dropped. A FIFO
// queue (name ending in .fifo) gets MessageGroupId = JobName (or "replay")
// and MessageDeduplicationId = the SHA-256 of Outgoing.MessageID, and its
// batches are sent one after the other to keep the order.
//
// On the query protocol (emulators: goaws drops the message attributes of
// SendMessageBatch entries, and with them the idempotency key) each
// message is sent with SendMessage instead, attributes kept.
type Publisher struct {
	client   *awssqs.Client
	endpoint string
	log      *slog.Logger
	single   bool // one SendMessage per message (query protocol)

	mu   sync.Mutex
	urls map[string]string // queue name -> URL
}

// NewPublisher returns a publisher built like the collector's client from
// cfg: Region (or the region of QueueURL), Endpoint and Protocol (query
// for goaws); QueueURL and SourceQueue are not used otherwise. It does not
// dial. It returns an EINVALID *quarantine.Error when the region is
// unknown, the protocol unsupported or the AWS configuration unreadable.
func NewPublisher(cfg Config, name string, logger *slog.Logger) (*Publisher, error) {
	logger = publisher.Log(logger, "sqs", name)
	cfg.Protocol = strings.ToLower(strings.TrimSpace(cfg.Protocol))
	if cfg.Protocol == "" {
		cfg.Protocol = ProtocolJSON
	}
	if cfg.Protocol != ProtocolJSON && cfg.Protocol != ProtocolQuery {
		return nil, invalid("protocol", "protocol must be %q or %q, got %q", ProtocolJSON, ProtocolQuery, cfg.Protocol)
	}
	if cfg.Region == "" {
		if u, err := httpURL(cfg.QueueURL); err == nil {
			cfg.Region = regionOf(u.Host)
		}
	}
	if cfg.Region == "" {
		return nil, invalid("region", "region is required (e.g. us-east-1)")
	}
	if cfg.Receivers == 0 {
		cfg.Receivers = publishParallel
	}
	c, err := newClient(context.Background(), cfg, logger)
	if err != nil {
		return nil, err
	}
	return &Publisher{client: c, endpoint: strings.TrimRight(cfg.Endpoint, "/"), log: logger, urls: map[string]string{},
		single: cfg.Protocol == ProtocolQuery}, nil
}

// Publish implements replay.Publisher. Errors in Results are
// *quarantine.Error values: ENOTFOUND for a missing queue, EINVALID for an
// entry SQS refused as the sender's fault, EUNAVAILABLE (or another code of
// translate) for what may work later.
func (p *Publisher) Publish(ctx context.Context, msgs []replay.Outgoing) []replay.Result {
	res := make([]replay.Result, len(msgs))
	var order []string
	byQueue := map[string][]int{}
	for i := range msgs {
		q := msgs[i].Queue
		if _, ok := byQueue[q]; !ok {
			order = append(order, q)
		}
		byQueue[q] = append(byQueue[q], i)
	}
	sem := make(chan struct{}, publishParallel)
	var wg sync.WaitGroup
	for _, q := range order {
		idx := byQueue[q]
		url, err := p.queueURL(ctx, q)
		if err != nil {
			for _, i := range idx {
				res[i] = p.refused(ctx, q, err)
			}
			continue
		}
		fifo := strings.HasSuffix(q, ".fifo")
		for _, chunk := range chunks(msgs, idx) {
			if fifo { // in order, one batch at a time
				p.send(ctx, url, q, msgs, chunk, res)
				continue
			}
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				p.send(ctx, url, q, msgs, chunk, res)
			})
		}
	}
	wg.Wait()
	return res
}

// send sends one batch (indices into msgs) and fills their results. A
// batch SQS refuses as a whole for the sender's fault is sent again one
// message per batch, so that one bad message fails alone.
func (p *Publisher) send(ctx context.Context, url, queue string, msgs []replay.Outgoing, chunk []int, res []replay.Result) {
	if p.single {
		for _, i := range chunk {
			res[i] = p.sendOne(ctx, url, queue, &msgs[i])
		}
		return
	}
	in := &awssqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: make([]types.SendMessageBatchRequestEntry, len(chunk))}
	fifo := strings.HasSuffix(queue, ".fifo")
	for k, i := range chunk {
		in.Entries[k] = entry(strconv.Itoa(k), &msgs[i], fifo)
	}
	out, err := p.client.SendMessageBatch(ctx, in)
	if err != nil {
		err = translate("SendMessageBatch", err)
		if quarantine.ErrorCode(err) == quarantine.EINVALID && len(chunk) > 1 && ctx.Err() == nil {
			for _, i := range chunk {
				p.send(ctx, url, queue, msgs, []int{i}, res)
			}
			return
		}
		if quarantine.ErrorCode(err) == quarantine.ENOTFOUND {
			p.forget(queue)
		}
		for _, i := range chunk {
			res[i] = p.refused(ctx, queue, err)
		}
		return
	}
	done := make([]bool, len(chunk))
	for _, s := range out.Successful {
		if k, ok := entryIndex(s.Id, len(chunk)); ok {
			res[chunk[k]] = replay.Result{Outcome: quarantine.ItemPublished}
			done[k] = true
		}
	}
	for _, f := range out.Failed {
		k, ok := entryIndex(f.Id, len(chunk))
		if !ok {
			continue
		}
		done[k] = true
		e := &quarantine.Error{Code: quarantine.EUNAVAILABLE,
			Message: fmt.Sprintf("sqs: queue %s did not take the message: %s: %s", queue, aws.ToString(f.Code), aws.ToString(f.Message))}
		if f.SenderFault {
			e.Code = quarantine.EINVALID
			res[chunk[k]] = replay.Result{Outcome: quarantine.ItemFailed, Err: e}
		} else { // throttled, or a fault of the service: offered again, a bounded number of times
			res[chunk[k]] = replay.Result{Outcome: quarantine.ItemPending, Refused: true, Err: e}
		}
	}
	for k, ok := range done {
		if !ok { // neither successful nor failed: do not claim it was sent
			res[chunk[k]] = replay.Result{Outcome: quarantine.ItemPending, Err: quarantine.Errorf(quarantine.EUNAVAILABLE,
				"sqs: SendMessageBatch did not report on the message for queue %s", queue)}
		}
	}
}

// sendOne sends one message with SendMessage (the query protocol's path).
func (p *Publisher) sendOne(ctx context.Context, url, queue string, o *replay.Outgoing) replay.Result {
	e := entry("0", o, strings.HasSuffix(queue, ".fifo"))
	_, err := p.client.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: e.MessageBody,
		MessageAttributes: e.MessageAttributes, MessageGroupId: e.MessageGroupId, MessageDeduplicationId: e.MessageDeduplicationId})
	if err != nil {
		err = translate("SendMessage", err)
		if quarantine.ErrorCode(err) == quarantine.ENOTFOUND {
			p.forget(queue)
		}
		return p.refused(ctx, queue, err)
	}
	return replay.Result{Outcome: quarantine.ItemPublished}
}

// refused turns an error about queue into a result: a missing queue fails
// the message, anything else leaves it pending.
func (p *Publisher) refused(ctx context.Context, queue string, err error) replay.Result {
	switch {
	case ctx.Err() != nil:
		return replay.Result{Outcome: quarantine.ItemPending, Err: translate("SendMessageBatch", ctx.Err())}
	case quarantine.ErrorCode(err) == quarantine.ENOTFOUND:
		return replay.Result{Outcome: quarantine.ItemFailed, Err: &quarantine.Error{Code: quarantine.ENOTFOUND, Err: err,
			Message: fmt.Sprintf("sqs: no queue named %s", queue)}}
	case quarantine.ErrorCode(err) == quarantine.EINVALID:
		return replay.Result{Outcome: quarantine.ItemFailed, Err: err}
	}
	// The service answered (throttling, a fault of its own): the engine
	// offers the message again a bounded number of times. One that was not
	// reached, or refused our credentials, spends no attempt: the item
	// waits for it (or for the operator's fix).
	var api smithy.APIError
	refused := errors.As(err, &api) && quarantine.ErrorCode(err) == quarantine.EUNAVAILABLE
	return replay.Result{Outcome: quarantine.ItemPending, Refused: refused, Err: err}
}

// queueURL returns the URL of queue, from the cache or GetQueueUrl.
func (p *Publisher) queueURL(ctx context.Context, queue string) (string, error) {
	p.mu.Lock()
	u, ok := p.urls[queue]
	p.mu.Unlock()
	if ok {
		return u, nil
	}
	if queue == "" {
		return "", quarantine.Errorf(quarantine.ENOTFOUND, "sqs: the destination queue name is empty")
	}
	out, err := p.client.GetQueueUrl(ctx, &awssqs.GetQueueUrlInput{QueueName: aws.String(queue)})
	if err != nil {
		return "", translate("GetQueueUrl", err)
	}
	u = p.onEndpoint(aws.ToString(out.QueueUrl))
	p.mu.Lock()
	p.urls[queue] = u
	p.mu.Unlock()
	return u, nil
}

// onEndpoint moves a queue URL onto the configured endpoint: emulators
// answer with hosts that do not resolve (goaws: us-east-1.127.0.0.1:4100).
func (p *Publisher) onEndpoint(raw string) string {
	if p.endpoint == "" {
		return raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	return p.endpoint + u.EscapedPath()
}

func (p *Publisher) forget(queue string) {
	p.mu.Lock()
	delete(p.urls, queue)
	p.mu.Unlock()
}

// Close releases nothing: the client holds only idle HTTP connections.
func (p *Publisher) Close() error { return nil }

// entry maps an Outgoing onto a batch entry.
func entry(id string, o *replay.Outgoing, fifo bool) types.SendMessageBatchRequestEntry {
	e := types.SendMessageBatchRequestEntry{Id: aws.String(id), MessageBody: aws.String(string(o.Payload))}
	if attrs := attributes(o); len(attrs) > 0 {
		e.MessageAttributes = attrs
	}
	if fifo {
		group := o.JobName
		if group == "" {
			group = "replay"
		}
		sum := sha256.Sum256([]byte(o.MessageID))
		e.MessageGroupId = aws.String(clipGroup(group))
		e.MessageDeduplicationId = aws.String(hex.EncodeToString(sum[:]))
	}
	return e
}

// attributes returns up to maxAttributes String attributes from o's
// headers: the replay headers, then the idempotency key (and any header
// that carries it), then the others by name.
func attributes(o *replay.Outgoing) map[string]types.MessageAttributeValue {
	h := o.Headers
	if o.IdempotencyKey != "" {
		if _, ok := h[replay.HeaderIdempotencyKey]; !ok {
			h = make(map[string]string, len(o.Headers)+1)
			for k, v := range o.Headers {
				h[k] = v
			}
			h[replay.HeaderIdempotencyKey] = o.IdempotencyKey
		}
	}
	rank := func(k string) int {
		switch k {
		case replay.HeaderReplayID:
			return 0
		case replay.HeaderReplayedBy:
			return 1
		case replay.HeaderOriginalID:
			return 2
		case replay.HeaderIdempotencyKey:
			return 3
		case replay.HeaderJobName:
			return 5
		}
		if o.IdempotencyKey != "" && h[k] == o.IdempotencyKey {
			return 4 // the key under the header the worker reads
		}
		return 6
	}
	attrs, _ := rankedAttributes(h, rank)
	return attrs
}

// rankedAttributes are the String attributes of h that SQS accepts
// (validAttribute), the first maxAttributes by rank then name; dropped
// are the names left out.
func rankedAttributes(h map[string]string, rank func(string) int) (attrs map[string]types.MessageAttributeValue, dropped []string) {
	names := make([]string, 0, len(h))
	for k, v := range h {
		if validAttribute(k, v) {
			names = append(names, k)
		} else {
			dropped = append(dropped, k)
		}
	}
	sort.Slice(names, func(i, j int) bool {
		if ri, rj := rank(names[i]), rank(names[j]); ri != rj {
			return ri < rj
		}
		return names[i] < names[j]
	})
	if len(names) > maxAttributes {
		dropped = append(dropped, names[maxAttributes:]...)
		names = names[:maxAttributes]
	}
	attrs = make(map[string]types.MessageAttributeValue, len(names))
	for _, k := range names {
		attrs[k] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(h[k])}
	}
	return attrs, dropped
}

// validAttribute reports whether SQS accepts name and value: a name of up
// to 256 letters, digits, '-', '_' and '.', no leading, trailing or double
// '.', no AWS. or Amazon. prefix; a non-empty value.
func validAttribute(name, value string) bool {
	if name == "" || len(name) > 256 || value == "" || strings.Contains(name, "..") ||
		name[0] == '.' || name[len(name)-1] == '.' {
		return false
	}
	low := strings.ToLower(name)
	if strings.HasPrefix(low, "aws.") || strings.HasPrefix(low, "amazon.") {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}

// chunks splits idx into batches of at most maxBatchEntries entries and
// maxBatchBytes bytes (a message above the limit goes alone, and SQS
// refuses it).
func chunks(msgs []replay.Outgoing, idx []int) [][]int {
	var out [][]int
	var cur []int
	size := 0
	for _, i := range idx {
		n := messageSize(&msgs[i])
		if len(cur) == maxBatchEntries || (len(cur) > 0 && size+n > maxBatchBytes) {
			out = append(out, cur)
			cur, size = nil, 0
		}
		cur = append(cur, i)
		size += n
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// messageSize is what SQS counts of a message: its body and its attributes'
// names, types and values (an upper bound: dropped attributes count too).
func messageSize(o *replay.Outgoing) int {
	n := len(o.Payload)
	for k, v := range o.Headers {
		n += len(k) + len(v) + len("String")
	}
	return n + len(replay.HeaderIdempotencyKey) + len(o.IdempotencyKey) + len("String")
}

func entryIndex(id *string, n int) (int, bool) {
	k, err := strconv.Atoi(aws.ToString(id))
	return k, err == nil && k >= 0 && k < n
}

// clipGroup keeps a MessageGroupId within what SQS accepts: up to 128
// printable ASCII characters, else a hash of the name.
func clipGroup(s string) string {
	ok := len(s) <= 128
	for i := 0; ok && i < len(s); i++ {
		ok = s[i] > ' ' && s[i] < 0x7f
	}
	if ok {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

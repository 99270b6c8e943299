package sqs

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/worker"
)

// Limits of the SQS work driver.
const (
	// MaxRetryDelay is the longest delay WorkDriver.Retry takes: the
	// DelaySeconds ceiling of SendMessage (15 minutes). See WorkDriver.
	MaxRetryDelay = 15 * time.Minute
	// MaxRenew caps how long Extend keeps one delivery: SQS refuses a
	// visibility beyond 12 hours from the first receive.
	MaxRenew = 12 * time.Hour

	// HeaderContentType is the message attribute carrying a job's content
	// type (Delivery.ContentType; also read as contentType, content_type).
	HeaderContentType = "content-type"
	// headerOrigin is the driver's own attribute on a message it re-sent
	// for a retry: "MessageId SentTimestamp" of the first message of the
	// job, so that Delivery.ID (the job id of the failure envelope) and
	// EnqueuedAt survive re-sends. Receive strips it from Headers; a
	// replay drops it (x-quarantine-* bookkeeping).
	headerOrigin = "x-quarantine-sqs-origin"
)

// WorkConfig is one SQS work queue and its failure queue for a worker.
type WorkConfig struct {
	// Region is the AWS region; when empty it is taken from a queue URL of
	// the form https://sqs.REGION.amazonaws.com/ACCOUNT/NAME.
	Region string
	// Endpoint overrides the service endpoint (emulators such as goaws);
	// Protocol is ProtocolJSON (default) or ProtocolQuery (goaws). As for
	// Config: with an endpoint and no AWS_ACCESS_KEY_ID, dummy
	// credentials are used.
	Endpoint string
	Protocol string
	// QueueURL is the work queue, or Queue its name (resolved once with
	// GetQueueUrl). Queue is also Delivery.Queue; when only QueueURL is
	// given it is the URL's last path segment. Standard queues only: a
	// FIFO queue (.fifo) is refused.
	QueueURL string
	Queue    string
	// FailureQueueURL (or FailureQueue, a name) receives the failure
	// envelopes of dead-lettered jobs. Required.
	FailureQueueURL string
	FailureQueue    string
	// VisibilityTimeout is asked for on every receive and renewed by
	// Extend, whole seconds (default DefaultVisibilityTimeout); the worker
	// renews every half of it.
	VisibilityTimeout time.Duration
	// WaitTime is the long-poll wait of each ReceiveMessage, whole seconds
	// up to 20 s (default DefaultWaitTime).
	WaitTime time.Duration
	// JobName, when set, is the job name of a message that carries none
	// (a queue dedicated to one job; also messages whose attributes were
	// lost, as goaws loses those of SendMessageBatch).
	JobName string
	// RejectVisibility is the visibility Reject gives a message (default
	// 0: visible again at once, so that the queue's redrive policy counts
	// the receive and moves it to its dead-letter queue promptly). A queue
	// without a redrive policy redelivers a rejected message for ever:
	// set a few seconds there to keep it from spinning.
	RejectVisibility time.Duration
}

// validate fills defaults and checks c.
func (c *WorkConfig) validate() error {
	c.Protocol = strings.ToLower(strings.TrimSpace(c.Protocol))
	if c.Protocol == "" {
		c.Protocol = ProtocolJSON
	}
	if c.Protocol != ProtocolJSON && c.Protocol != ProtocolQuery {
		return invalid("protocol", "protocol must be %q or %q, got %q", ProtocolJSON, ProtocolQuery, c.Protocol)
	}
	if c.VisibilityTimeout == 0 {
		c.VisibilityTimeout = DefaultVisibilityTimeout
	}
	if c.WaitTime == 0 {
		c.WaitTime = DefaultWaitTime
	}
	if c.QueueURL == "" && c.Queue == "" {
		return invalid("queue_url", "the work queue is required: queue_url or queue")
	}
	if c.FailureQueueURL == "" && c.FailureQueue == "" {
		return invalid("failure_queue_url", "the failure queue is required: failure_queue_url or failure_queue")
	}
	for field, raw := range map[string]string{"queue_url": c.QueueURL, "failure_queue_url": c.FailureQueueURL} {
		if raw == "" {
			continue
		}
		u, err := httpURL(raw)
		if err != nil || strings.Trim(u.Path, "/") == "" {
			return invalid(field, "%s %q is not the http(s) URL of a queue", field, raw)
		}
		if c.Region == "" {
			c.Region = regionOf(u.Host)
		}
	}
	if c.Queue == "" {
		c.Queue = lastSegment(c.QueueURL)
	}
	if c.Region == "" {
		return invalid("region", "region is required (e.g. us-east-1)")
	}
	if strings.HasSuffix(c.Queue, ".fifo") {
		return invalid("queue", "queue %q is a FIFO queue: the work driver supports standard queues only", c.Queue)
	}
	if c.Endpoint != "" {
		if _, err := httpURL(c.Endpoint); err != nil {
			return invalid("endpoint", "endpoint %q is not an http(s) URL", c.Endpoint)
		}
	}
	if c.WaitTime < time.Second || c.WaitTime > MaxWaitTime || c.WaitTime%time.Second != 0 {
		return invalid("wait_time", "wait_time must be whole seconds between 1s and %s, got %s", MaxWaitTime, c.WaitTime)
	}
	if c.VisibilityTimeout < 2*time.Second || c.VisibilityTimeout > MaxVisibilityTimeout || c.VisibilityTimeout%time.Second != 0 {
		return invalid("visibility_timeout", "visibility_timeout must be whole seconds between 2s and %s, got %s", MaxVisibilityTimeout, c.VisibilityTimeout)
	}
	if c.RejectVisibility < 0 || c.RejectVisibility > MaxVisibilityTimeout || c.RejectVisibility%time.Second != 0 {
		return invalid("reject_visibility", "reject_visibility must be whole seconds up to %s, got %s", MaxVisibilityTimeout, c.RejectVisibility)
	}
	return nil
}

func lastSegment(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	p := strings.Trim(u.Path, "/")
	return p[strings.LastIndex(p, "/")+1:]
}

// WorkDriver is a worker.Driver over one SQS work queue and its failure
// queue, and a worker.Sender for Dispatch.
//
// Receive long-polls ReceiveMessage (up to 10, every attribute). A
// Delivery has ID = MessageId (of the job's first message, kept across
// retries), JobName from the x-quarantine-job-name attribute (or
// WorkConfig.JobName), Headers from the String and Number attributes,
// ContentType from a content-type attribute, Attempt =
// ApproximateReceiveCount, EnqueuedAt = SentTimestamp (of the first
// message) and Ref the receipt handle.
//
// Retry re-sends the message with the worker's updated headers
// (x-quarantine-attempts, x-quarantine-first-failed-at) and
// DelaySeconds = the delay, then deletes the original. A visibility
// change alone cannot carry headers, and the attempt cap would then rest
// on ApproximateReceiveCount, which goaws keeps at 1 (the cap would never
// hold there); the re-sent count holds on both. The price: delays are at
// most 15 minutes (MaxRetryDelay, the DelaySeconds ceiling; Limits says
// so and the worker refuses a job whose backoff can exceed it), and a
// crash (or a failed delete) between the send and the delete leaves two
// copies of the job, which the idempotency claims absorb. A delivery
// whose visibility expired without settlement (a dead process) is
// counted by ApproximateReceiveCount on AWS, not on goaws.
//
// DeadLetter sends the envelope to the failure queue and deletes the
// source only once SQS accepted it; a failed send returns the error and
// deletes nothing. Reject sets the visibility to
// WorkConfig.RejectVisibility (default 0): the queue's redrive policy
// decides. Extend renews the visibility to VisibilityTimeout; Limits asks
// for it every half timeout, for at most 12 hours.
//
// Messages carry at most 10 attributes (SQS's limit). Send and Retry
// keep, in order: the driver's origin, x-idempotency-key,
// x-quarantine-job-name, x-schema-version, x-quarantine-attempts,
// x-quarantine-first-failed-at, the other x-quarantine-* headers by
// name, content-type, then the rest by name; the remainder, and
// headers SQS refuses (an empty value, a name with other characters than
// letters, digits, '-', '_', '.', or starting with AWS. or Amazon.), are
// dropped and their names logged.
type WorkDriver struct {
	cfg      WorkConfig
	client   *awssqs.Client
	endpoint string
	log      *slog.Logger

	mu   sync.Mutex
	urls map[string]string // queue name -> URL
}

var (
	_ worker.Driver = (*WorkDriver)(nil)
	_ worker.Sender = (*WorkDriver)(nil)
)

// receipt is a WorkDriver's Delivery.Ref.
type receipt struct {
	handle string
	origin string // "MessageId SentTimestamp" of the job's first message
}

// NewWorkDriver returns a driver for cfg. It does not dial (a queue given
// by name is resolved on first use). It returns an EINVALID
// *quarantine.Error naming the field at fault.
func NewWorkDriver(cfg WorkConfig, logger *slog.Logger) (*WorkDriver, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	logger = logger.With("component", "sqs work driver", "queue", cfg.Queue)
	c, err := newClient(context.Background(), Config{Region: cfg.Region, Endpoint: cfg.Endpoint, Protocol: cfg.Protocol, Receivers: 4}, logger)
	if err != nil {
		return nil, err
	}
	d := &WorkDriver{cfg: cfg, client: c, endpoint: strings.TrimRight(cfg.Endpoint, "/"), log: logger, urls: map[string]string{}}
	if cfg.QueueURL != "" {
		d.urls[cfg.Queue] = cfg.QueueURL
	}
	return d, nil
}

// Queue returns the work queue's name.
func (w *WorkDriver) Queue() string { return w.cfg.Queue }

// workURL returns the work queue's URL.
func (w *WorkDriver) workURL(ctx context.Context) (string, error) {
	return w.queueURL(ctx, w.cfg.Queue)
}

// failureURL returns the failure queue's URL.
func (w *WorkDriver) failureURL(ctx context.Context) (string, error) {
	if w.cfg.FailureQueueURL != "" {
		return w.cfg.FailureQueueURL, nil
	}
	return w.queueURL(ctx, w.cfg.FailureQueue)
}

// queueURL returns the URL of queue name, from the cache or GetQueueUrl
// (moved onto the endpoint: goaws answers with hosts that do not resolve).
func (w *WorkDriver) queueURL(ctx context.Context, name string) (string, error) {
	w.mu.Lock()
	u, ok := w.urls[name]
	w.mu.Unlock()
	if ok {
		return u, nil
	}
	out, err := w.client.GetQueueUrl(ctx, &awssqs.GetQueueUrlInput{QueueName: aws.String(name)})
	if err != nil {
		return "", translate("GetQueueUrl "+name, err)
	}
	u = aws.ToString(out.QueueUrl)
	if w.endpoint != "" {
		if p, err := url.Parse(u); err == nil {
			u = w.endpoint + p.EscapedPath()
		}
	}
	w.mu.Lock()
	w.urls[name] = u
	w.mu.Unlock()
	return u, nil
}

// Receive implements worker.Driver: long polls until at least one message
// arrives or ctx ends.
func (w *WorkDriver) Receive(ctx context.Context, n int) ([]*worker.Delivery, error) {
	n = min(max(n, 1), 10)
	qurl, err := w.workURL(ctx)
	if err != nil {
		return nil, err
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rctx, cancel := context.WithTimeout(ctx, w.cfg.WaitTime+15*time.Second)
		out, err := w.client.ReceiveMessage(rctx, &awssqs.ReceiveMessageInput{
			QueueUrl:                    aws.String(qurl),
			MaxNumberOfMessages:         int32(n),
			WaitTimeSeconds:             int32(w.cfg.WaitTime / time.Second),
			VisibilityTimeout:           int32(w.cfg.VisibilityTimeout / time.Second),
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		})
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, translate("ReceiveMessage", err)
		}
		if len(out.Messages) == 0 {
			continue
		}
		ds := make([]*worker.Delivery, 0, len(out.Messages))
		for _, m := range out.Messages {
			ds = append(ds, w.delivery(m))
		}
		return ds, nil
	}
}

// delivery fills a Delivery from a received message.
func (w *WorkDriver) delivery(m types.Message) *worker.Delivery {
	d := &worker.Delivery{ID: aws.ToString(m.MessageId), Queue: w.cfg.Queue, Body: []byte(aws.ToString(m.Body))}
	sent := m.Attributes[attrSentTimestamp]
	h := make(map[string]string, len(m.MessageAttributes))
	origin := ""
	for name, a := range m.MessageAttributes {
		if a.StringValue == nil || strings.HasPrefix(aws.ToString(a.DataType), "Binary") {
			continue
		}
		switch {
		case name == headerOrigin:
			origin = *a.StringValue
		case strings.EqualFold(name, HeaderContentType) || strings.EqualFold(name, "contentType") || strings.EqualFold(name, "content_type"):
			d.ContentType = *a.StringValue
		default:
			h[name] = *a.StringValue
		}
	}
	if id, ts, ok := strings.Cut(origin, " "); ok && id != "" {
		d.ID, sent = id, ts
	} else {
		origin = d.ID + " " + sent
	}
	d.Headers = h
	d.JobName = d.Header(worker.HeaderJobName)
	if d.JobName == "" {
		d.JobName = w.cfg.JobName
	}
	// goaws keeps ApproximateReceiveCount at 1; the worker also reads
	// x-quarantine-attempts, which Retry carries.
	if n, err := receiveCount(m.Attributes[attrReceiveCount]); err == nil {
		d.Attempt = n
	}
	if t := millis(sent); t != nil {
		d.EnqueuedAt = *t
	}
	d.Ref = receipt{handle: aws.ToString(m.ReceiptHandle), origin: origin}
	return d
}

func ref(d *worker.Delivery) (receipt, error) {
	r, ok := d.Ref.(receipt)
	if !ok || r.handle == "" {
		return receipt{}, quarantine.Errorf(quarantine.EINVALID, "sqs: delivery %s was not received by this driver", d.ID)
	}
	return r, nil
}

// Ack implements worker.Driver: DeleteMessage.
func (w *WorkDriver) Ack(ctx context.Context, d *worker.Delivery) error {
	return w.delete(ctx, d)
}

func (w *WorkDriver) delete(ctx context.Context, d *worker.Delivery) error {
	r, qurl, err := w.receipt(ctx, d)
	if err != nil {
		return err
	}
	_, err = w.client.DeleteMessage(ctx, &awssqs.DeleteMessageInput{QueueUrl: aws.String(qurl), ReceiptHandle: aws.String(r.handle)})
	return translate("DeleteMessage", err)
}

// receipt is d's receipt and the URL of the work queue it came from.
func (w *WorkDriver) receipt(ctx context.Context, d *worker.Delivery) (receipt, string, error) {
	r, err := ref(d)
	if err != nil {
		return receipt{}, "", err
	}
	qurl, err := w.workURL(ctx)
	if err != nil {
		return receipt{}, "", err
	}
	return r, qurl, nil
}

// sendThenDelete sends in, then deletes d. A failed send deletes nothing;
// a failed delete is logged (warn says what it leaves) and returned.
func (w *WorkDriver) sendThenDelete(ctx context.Context, d *worker.Delivery, in *awssqs.SendMessageInput, op, warn string) error {
	if _, err := w.client.SendMessage(ctx, in); err != nil {
		return translate(op, err)
	}
	if err := w.delete(ctx, d); err != nil {
		w.log.Warn(warn, "delivery", d.ID, "err", err)
		return err
	}
	return nil
}

// Retry implements worker.Driver: the message is sent again with
// d.Headers and d.Body and DelaySeconds = delay (at most 15 minutes), then
// the original is deleted. A failed send deletes nothing; a failed delete
// returns its error and leaves a second copy (absorbed by the claims).
func (w *WorkDriver) Retry(ctx context.Context, d *worker.Delivery, delay time.Duration) error {
	r, err := ref(d)
	if err != nil {
		return err
	}
	if delay < 0 || delay > MaxRetryDelay {
		return quarantine.Errorf(quarantine.EINVALID, "sqs: retry delay %s is outside 0..%s", delay, MaxRetryDelay)
	}
	secs := int32((delay + time.Second - 1) / time.Second)
	qurl, err := w.workURL(ctx)
	if err != nil {
		return err
	}
	attrs := w.attributes(d.Headers, d.ContentType, "", r.origin)
	return w.sendThenDelete(ctx, d, &awssqs.SendMessageInput{
		QueueUrl: aws.String(qurl), MessageBody: aws.String(string(d.Body)),
		MessageAttributes: attrs, DelaySeconds: secs,
	}, "SendMessage (retry)", "retry: the job was re-sent but the original not deleted: it will run twice unless claimed")
}

// DeadLetter implements worker.Driver: SendMessage of the envelope to the
// failure queue, then DeleteMessage of the source.
func (w *WorkDriver) DeadLetter(ctx context.Context, d *worker.Delivery, envelope []byte) error {
	if _, err := ref(d); err != nil {
		return err
	}
	furl, err := w.failureURL(ctx)
	if err != nil {
		return err
	}
	return w.sendThenDelete(ctx, d, &awssqs.SendMessageInput{
		QueueUrl: aws.String(furl), MessageBody: aws.String(string(envelope)),
	}, "SendMessage (failure queue)", "dead-letter: the envelope was sent but the job not deleted: it may be dead-lettered twice")
}

// Reject implements worker.Driver: the message becomes visible after
// WorkConfig.RejectVisibility (default at once), for the queue's redrive
// policy to decide.
func (w *WorkDriver) Reject(ctx context.Context, d *worker.Delivery) error {
	return w.visibility(ctx, d, w.cfg.RejectVisibility, "reject")
}

// Extend implements worker.Driver: the visibility is set to the
// configured timeout again.
func (w *WorkDriver) Extend(ctx context.Context, d *worker.Delivery) error {
	return w.visibility(ctx, d, w.cfg.VisibilityTimeout, "extend")
}

func (w *WorkDriver) visibility(ctx context.Context, d *worker.Delivery, v time.Duration, op string) error {
	r, qurl, err := w.receipt(ctx, d)
	if err != nil {
		return err
	}
	_, err = w.client.ChangeMessageVisibility(ctx, &awssqs.ChangeMessageVisibilityInput{
		QueueUrl: aws.String(qurl), ReceiptHandle: aws.String(r.handle), VisibilityTimeout: int32(v / time.Second)})
	return translate("ChangeMessageVisibility ("+op+")", err)
}

// Limits implements worker.Driver.
func (w *WorkDriver) Limits() worker.Limits {
	return worker.Limits{MaxDelay: MaxRetryDelay, DelayStep: time.Second,
		RenewEvery: w.cfg.VisibilityTimeout / 2, MaxRenew: MaxRenew}
}

// Send implements worker.Sender: SendMessage to m.Queue (the work queue
// when empty or the same; another queue by GetQueueUrl), the headers as
// String attributes (see WorkDriver for which ten are kept).
func (w *WorkDriver) Send(ctx context.Context, m *worker.Message) error {
	q := m.Queue
	if q == "" {
		q = w.cfg.Queue
	}
	qurl, err := w.queueURL(ctx, q)
	if err != nil {
		return err
	}
	_, err = w.client.SendMessage(ctx, &awssqs.SendMessageInput{
		QueueUrl: aws.String(qurl), MessageBody: aws.String(string(m.Body)),
		MessageAttributes: w.attributes(m.Headers, m.ContentType, m.JobName, ""),
	})
	return translate("SendMessage", err)
}

// attributes returns at most maxAttributes String attributes: origin
// (when set), then the headers ranked as WorkDriver says, with jobName
// and contentType added when the headers lack them. It logs the names
// it drops.
func (w *WorkDriver) attributes(headers map[string]string, contentType, jobName, origin string) map[string]types.MessageAttributeValue {
	h := make(map[string]string, len(headers)+3)
	for k, v := range headers {
		if k == headerOrigin || strings.EqualFold(k, HeaderContentType) {
			continue
		}
		h[k] = v
	}
	if jobName != "" {
		if _, ok := h[worker.HeaderJobName]; !ok {
			h[worker.HeaderJobName] = jobName
		}
	}
	if contentType != "" {
		h[HeaderContentType] = contentType
	}
	if origin != "" {
		h[headerOrigin] = origin
	}
	rank := func(k string) int {
		switch strings.ToLower(k) {
		case headerOrigin:
			return 0
		case worker.HeaderIdempotencyKey:
			return 1
		case worker.HeaderJobName:
			return 2
		case worker.HeaderSchemaVersion:
			return 3
		case worker.HeaderAttempts:
			return 4
		case worker.HeaderFirstFailedAt:
			return 5
		case HeaderContentType:
			return 7
		}
		if strings.HasPrefix(strings.ToLower(k), "x-quarantine-") {
			return 6
		}
		return 8
	}
	attrs, dropped := rankedAttributes(h, rank)
	if len(dropped) > 0 {
		sort.Strings(dropped)
		w.log.Warn("headers not sent as SQS message attributes (at most "+strconv.Itoa(maxAttributes)+", and only names and values SQS accepts)",
			"dropped", strings.Join(dropped, ","))
	}
	return attrs
}

// String describes the driver for logs.
func (w *WorkDriver) String() string {
	return fmt.Sprintf("sqs work queue %s", w.cfg.Queue)
}

package sqs

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	neturl "net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/replay"
)

// replayMsgs returns n replay messages to queue, numbered from first.
func replayMsgs(run, queue string, first, n int) []replay.Outgoing {
	out := make([]replay.Outgoing, n)
	for i := range out {
		k := first + i
		key := fmt.Sprintf("bill:%s:%d", run, k)
		out[i] = replay.Outgoing{
			Queue: queue, MessageID: fmt.Sprintf("rb-%s-%d", run, k), IdempotencyKey: key,
			JobName: "billing.invoice", ContentType: "application/json",
			Payload: fmt.Appendf(nil, `{"run":%q,"n":%d}`, run, k),
			Headers: map[string]string{
				replay.HeaderReplayID:       "rb-" + run,
				replay.HeaderReplayedBy:     "alice",
				replay.HeaderOriginalID:     fmt.Sprintf("orig-%d", k),
				replay.HeaderIdempotencyKey: key,
				replay.HeaderJobName:        "billing.invoice",
			},
		}
	}
	return out
}

func testPublisher(t *testing.T, e *env) *Publisher { return publisherAt(t, e.endpoint) }

// publisherAt returns a Publisher to the emulator at endpoint.
func publisherAt(t *testing.T, endpoint string) *Publisher {
	t.Helper()
	p, err := NewPublisher(testConfig(endpoint, endpoint+"/"+goawsAccount+"/unused"), "test", quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// receiveAll receives (and deletes) n messages of url with their
// attributes, failing when fewer arrive.
func (e *env) receiveAll(url string, n int) []types.Message {
	e.tb.Helper()
	ctx := context.Background()
	var out []types.Message
	deadline := time.Now().Add(30 * time.Second)
	for len(out) < n {
		if time.Now().After(deadline) {
			e.tb.Fatalf("received %d of %d messages", len(out), n)
		}
		r, err := e.client.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: aws.String(url),
			MaxNumberOfMessages: 10, WaitTimeSeconds: 1, MessageAttributeNames: []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}})
		if err != nil {
			e.tb.Fatal(err)
		}
		for _, m := range r.Messages {
			out = append(out, m)
			if _, err := e.client.DeleteMessage(ctx, &awssqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}); err != nil {
				e.tb.Fatal(err)
			}
		}
	}
	return out
}

// recorder is an HTTP proxy in front of the emulator that keeps the
// message attributes of every SendMessageBatch entry, by body: goaws
// v0.4.5 ignores the attributes of batch entries, so the tests check what
// was sent on the wire.
type recorder struct {
	url   string
	mu    sync.Mutex
	attrs map[string]map[string]string // body -> attribute name -> value
	fifo  map[string][2]string         // body -> MessageGroupId, MessageDeduplicationId
	order []string                     // bodies in the order sent
}

func newRecorder(t *testing.T, target string) *recorder {
	t.Helper()
	u, err := neturl.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{attrs: map[string]map[string]string{}, fifo: map[string][2]string{}}
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(body))
		if form, err := neturl.ParseQuery(string(body)); err == nil {
			switch form.Get("Action") {
			case "SendMessageBatch":
				r.record(form)
			case "SendMessage": // the publisher's path on the query protocol
				r.recordOne(form, "")
			}
		}
		rp.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

func (r *recorder) record(form neturl.Values) {
	for n := 1; n <= maxBatchEntries; n++ {
		p := fmt.Sprintf("SendMessageBatchRequestEntry.%d.", n)
		if _, ok := form[p+"MessageBody"]; !ok {
			break
		}
		r.recordOne(form, p)
	}
}

// recordOne records the message whose fields start with prefix p.
func (r *recorder) recordOne(form neturl.Values, p string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	{
		body, ok := form[p+"MessageBody"]
		if !ok {
			return
		}
		a := map[string]string{}
		for m := 1; ; m++ {
			q := fmt.Sprintf("%sMessageAttribute.%d.", p, m)
			name := form.Get(q + "Name")
			if name == "" {
				break
			}
			if form.Get(q+"Value.DataType") == "String" {
				a[name] = form.Get(q + "Value.StringValue")
			}
		}
		r.attrs[body[0]] = a
		r.fifo[body[0]] = [2]string{form.Get(p + "MessageGroupId"), form.Get(p + "MessageDeduplicationId")}
		r.order = append(r.order, body[0])
	}
}

// sent returns the attributes sent with body.
func (r *recorder) sent(body string) map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.attrs[body]
}

func attr(m types.Message, k string) string {
	v, ok := m.MessageAttributes[k]
	if !ok {
		return ""
	}
	return aws.ToString(v.StringValue)
}

// TestPublishConsumeBack publishes through both paths: SendMessage per
// message (the query protocol's, what goaws keeps attributes on) and
// SendMessageBatch (real SQS's; goaws drops the attributes of its
// entries, so those are read from the wire).
func TestPublishConsumeBack(t *testing.T) {
	t.Parallel()
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprintf("batch=%v", batch), func(t *testing.T) {
			t.Parallel()
			testPublishConsumeBack(t, batch)
		})
	}
}

func testPublishConsumeBack(t *testing.T, batch bool) {
	e := newEnv(t)
	name, url := e.queue("replay", nil)
	rec := newRecorder(t, e.endpoint)
	p := publisherAt(t, rec.url)
	p.single = !batch
	msgs := replayMsgs("back", name, 0, 35)
	// More headers than SQS takes: the replay ones and the key win.
	for k := range 8 {
		msgs[0].Headers[fmt.Sprintf("a-extra-%d", k)] = "x"
	}
	msgs[0].Headers["Idempotency-Key"] = msgs[0].IdempotencyKey // the worker's own header
	msgs[1].Headers["bad name!"] = "dropped"
	msgs[1].Headers["empty"] = ""

	res := p.Publish(context.Background(), msgs)
	for i, r := range res {
		if r.Outcome != quarantine.ItemPublished {
			t.Fatalf("message %d: %s %v", i, r.Outcome, r.Err)
		}
	}
	byBody := map[string]replay.Outgoing{}
	for _, m := range msgs {
		byBody[string(m.Payload)] = m
	}
	for _, m := range e.receiveAll(url, len(msgs)) {
		body := aws.ToString(m.Body)
		o, ok := byBody[body]
		if !ok {
			t.Fatalf("unexpected or repeated body %q", body)
		}
		delete(byBody, body)
		attrs := rec.sent(body)
		if len(m.MessageAttributes) > 0 { // an emulator (or SQS) that keeps them
			attrs = map[string]string{}
			for k := range m.MessageAttributes {
				attrs[k] = attr(m, k)
			}
		}
		for _, k := range []string{replay.HeaderReplayID, replay.HeaderReplayedBy, replay.HeaderOriginalID, replay.HeaderIdempotencyKey, replay.HeaderJobName} {
			if got := attrs[k]; got != o.Headers[k] {
				t.Errorf("%s: attribute %s = %q, want %q (attributes %v)", o.MessageID, k, got, o.Headers[k], attrs)
			}
		}
		switch o.MessageID {
		case msgs[0].MessageID:
			if len(attrs) != maxAttributes || attrs["Idempotency-Key"] != o.IdempotencyKey {
				t.Errorf("%d attributes %v: want %d with Idempotency-Key", len(attrs), attrs, maxAttributes)
			}
		case msgs[1].MessageID:
			if len(attrs) != 5 {
				t.Errorf("attributes %v: want the 5 valid ones", attrs)
			}
		}
	}
	if len(byBody) != 0 {
		t.Fatalf("%d messages not received", len(byBody))
	}
	eventually(t, 10*time.Second, "the received messages deleted", func() bool { return e.depth(url) == 0 })
}

func TestPublishUnreachableIsPending(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	name, url := e.queue("replay", nil)
	px := newProxy(t, strings.TrimPrefix(e.endpoint, "http://"))
	p := publisherAt(t, "http://"+px.addr())
	if c := outcomeCounts(p.Publish(context.Background(), replayMsgs("cut", name, 0, 3))); c[quarantine.ItemPublished] != 3 {
		t.Fatalf("before the cut: %v", c)
	}
	px.cut()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	msgs := replayMsgs("cut", name, 3, 12)
	for i, r := range p.Publish(ctx, msgs) {
		if r.Outcome != quarantine.ItemPending || quarantine.ErrorCode(r.Err) != quarantine.EUNAVAILABLE {
			t.Fatalf("message %d while cut: %s %v", i, r.Outcome, r.Err)
		}
	}
	px.restore()
	if c := outcomeCounts(p.Publish(context.Background(), msgs)); c[quarantine.ItemPublished] != len(msgs) {
		t.Fatalf("after the restore: %v", c)
	}
	e.receiveAll(url, 15)
}

func outcomeCounts(res []replay.Result) map[quarantine.ItemOutcome]int {
	c := map[quarantine.ItemOutcome]int{}
	for _, r := range res {
		c[r.Outcome]++
	}
	return c
}

func TestPublishMissingQueueFailsAlone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	name, url := e.queue("replay", nil)
	missing := name + "-missing"
	p := testPublisher(t, e)
	msgs := replayMsgs("missing", name, 0, 25)
	for i := 0; i < len(msgs); i += 4 {
		msgs[i].Queue = missing
	}
	want := 0
	for i, r := range p.Publish(context.Background(), msgs) {
		if msgs[i].Queue == missing {
			if r.Outcome != quarantine.ItemFailed || quarantine.ErrorCode(r.Err) != quarantine.ENOTFOUND ||
				!strings.Contains(r.Err.Error(), "no queue named "+missing) {
				t.Fatalf("message %d: %s %v", i, r.Outcome, r.Err)
			}
			continue
		}
		want++
		if r.Outcome != quarantine.ItemPublished {
			t.Fatalf("message %d: %s %v", i, r.Outcome, r.Err)
		}
	}
	for _, m := range e.receiveAll(url, want) {
		var n int
		if _, err := fmt.Sscanf(aws.ToString(m.Body), `{"run":"missing","n":%d}`, &n); err != nil || n%4 == 0 {
			t.Fatalf("unexpected message %q", aws.ToString(m.Body))
		}
	}
	// The URL is cached: a second slice needs no GetQueueUrl.
	p.mu.Lock()
	cached := p.urls[name]
	p.mu.Unlock()
	if cached != url {
		t.Fatalf("cached URL %q, want %q", cached, url)
	}
}

func TestPublishFIFO(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	fifoName := "replay-" + strings.ReplaceAll(time.Now().Format("150405.000000"), ".", "") + ".fifo"
	if _, err := e.client.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String(fifoName),
		Attributes: map[string]string{"FifoQueue": "true", "VisibilityTimeout": "30"}}); err != nil {
		t.Fatal(err)
	}
	furl := e.endpoint + "/" + goawsAccount + "/" + fifoName
	t.Cleanup(func() {
		_, _ = e.client.DeleteQueue(context.Background(), &awssqs.DeleteQueueInput{QueueUrl: aws.String(furl)})
	})
	rec := newRecorder(t, e.endpoint)
	p := publisherAt(t, rec.url)
	msgs := replayMsgs("fifo", fifoName, 0, 23)
	for i, r := range p.Publish(ctx, msgs) {
		if r.Outcome != quarantine.ItemPublished {
			t.Fatalf("message %d: %s %v", i, r.Outcome, r.Err)
		}
	}
	// Sent in order, batch after batch, with the group and a stable
	// deduplication id.
	if len(rec.order) != len(msgs) {
		t.Fatalf("%d entries sent, want %d", len(rec.order), len(msgs))
	}
	for i, body := range rec.order {
		if body != string(msgs[i].Payload) {
			t.Fatalf("entry %d sent out of order: %s", i, body)
		}
		if f := rec.fifo[body]; f[0] != "billing.invoice" || len(f[1]) != 64 {
			t.Fatalf("entry %d: group %q, deduplication id %q", i, f[0], f[1])
		}
	}
	// goaws v0.4.5 hands out one message of a FIFO group per visibility
	// timeout (it marks the others in flight), so only the head is read.
	if d := e.held(furl); d != len(msgs) {
		t.Fatalf("queue holds %d, want %d", d, len(msgs))
	}
	head := e.receiveAll(furl, 1)[0]
	if aws.ToString(head.Body) != string(msgs[0].Payload) {
		t.Fatalf("head %s, want %s", aws.ToString(head.Body), msgs[0].Payload)
	}
	if g := head.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)]; g != "" && g != "billing.invoice" {
		t.Fatalf("group %q", g)
	}
}

func TestPublishFIFOEntry(t *testing.T) {
	t.Parallel()
	o := replayMsgs("unit", "jobs.fifo", 0, 1)[0]
	o.JobName = ""
	e := entry("0", &o, true)
	if aws.ToString(e.MessageGroupId) != "replay" || len(aws.ToString(e.MessageDeduplicationId)) != 64 {
		t.Fatalf("group %q dedupe %q", aws.ToString(e.MessageGroupId), aws.ToString(e.MessageDeduplicationId))
	}
	again := entry("1", &o, true)
	if aws.ToString(again.MessageDeduplicationId) != aws.ToString(e.MessageDeduplicationId) {
		t.Fatal("the deduplication id is not stable across republishes")
	}
	if e2 := entry("0", &o, false); e2.MessageGroupId != nil || e2.MessageDeduplicationId != nil {
		t.Fatal("a standard queue got FIFO fields")
	}
}

func TestPublishChunks(t *testing.T) {
	t.Parallel()
	msgs := replayMsgs("chunks", "q", 0, 25)
	msgs[3].Payload = make([]byte, 200<<10)
	msgs[4].Payload = make([]byte, 200<<10)
	idx := make([]int, len(msgs))
	for i := range idx {
		idx[i] = i
	}
	var sizes []int
	for _, c := range chunks(msgs, idx) {
		sizes = append(sizes, len(c))
		total := 0
		for _, i := range c {
			total += messageSize(&msgs[i])
		}
		if len(c) > maxBatchEntries || (len(c) > 1 && total > maxBatchBytes) {
			t.Fatalf("chunk %v: %d entries, %d bytes", c, len(c), total)
		}
	}
	if fmt.Sprint(sizes) != "[4 10 10 1]" {
		t.Fatalf("chunk sizes %v", sizes)
	}
}

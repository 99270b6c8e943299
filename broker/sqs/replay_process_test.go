package sqs

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/quarantine-dev/quarantine/internal/testbin"
	"github.com/quarantine-dev/quarantine/replay"
)

// nativeDeadLetters makes n native dead letters as an application and a
// failing worker would: jobs sent one by one (SendMessage keeps their
// attributes) to a work queue whose RedrivePolicy (maxReceiveCount 1)
// names a dead-letter queue, each with an idempotency key, a secret
// Authorization attribute and a trace attribute; then a worker that
// receives them and gives each up (ChangeMessageVisibility 0, as a nack)
// until goaws has moved everything to the dead-letter queue (one receive
// later than AWS would). It returns both queues' names and URLs.
func nativeDeadLetters(e *env, prefix string, n int) (work, workURL, dlq, dlqURL string) {
	e.tb.Helper()
	ctx := context.Background()
	dlq, dlqURL = e.queue(prefix+"-dlq", nil)
	attrs, err := e.client.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: aws.String(dlqURL),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
	if err != nil {
		e.tb.Fatal(err)
	}
	policy := fmt.Sprintf(`{"maxReceiveCount":"1","deadLetterTargetArn":%q}`, attrs.Attributes["QueueArn"])
	work, workURL = e.queue(prefix+"-work", map[string]string{"VisibilityTimeout": "1", "RedrivePolicy": policy})
	str := func(s string) types.MessageAttributeValue {
		return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(s)}
	}
	for i := range n {
		e.sendOne(workURL, fmt.Sprintf(`{"order_id":%d,"currency":"eur"}`, i), map[string]types.MessageAttributeValue{
			"x-idempotency-key": str(fmt.Sprintf("order-%d", i)),
			"Authorization":     str("Bearer s3cret"),
			"x-trace":           str(fmt.Sprintf("t%d", i)),
		})
	}
	eventually(e.tb, 60*time.Second, "goaws to redrive the jobs to the dead-letter queue", func() bool {
		r, err := e.client.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: aws.String(workURL), MaxNumberOfMessages: 10})
		if err != nil {
			e.tb.Fatal(err)
		}
		for _, m := range r.Messages {
			_, _ = e.client.ChangeMessageVisibility(ctx, &awssqs.ChangeMessageVisibilityInput{
				QueueUrl: aws.String(workURL), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0})
		}
		return e.held(workURL) == 0 && e.depth(dlqURL) == n
	})
	return work, workURL, dlq, dlqURL
}

// sqsReplayConfig writes the configuration of a binary with one sqs
// collector on dlqURL whose jobs belong to (and replay to) work, talking
// to the emulator through endpoint.
func sqsReplayConfig(t *testing.T, endpoint, dlqURL, work string) string {
	t.Helper()
	dir := t.TempDir()
	config := filepath.Join(dir, "quarantine.yaml")
	yaml := fmt.Sprintf(`database: "sqlite:%s"
listen: 127.0.0.1:0
collectors:
  - name: orders-sqs
    kind: sqs
    region: us-east-1
    endpoint: %s
    protocol: query
    queue_url: %s
    source_queue: %s
    wait_time: 1s
    linger: 20ms
idempotency:
  - queues: [%q]
    header: x-idempotency-key
replay: {canary: 0, poll: 100ms}
`, filepath.Join(dir, "q.db"), endpoint, dlqURL, work, work)
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return config
}

// drainQueue receives and deletes n messages of queueURL within d, then
// waits quiet for more: it returns everything that arrived.
func (e *env) drainQueue(queueURL string, n int, d time.Duration) []types.Message {
	e.tb.Helper()
	ctx := context.Background()
	var out []types.Message
	receive := func(wait int32) int {
		r, err := e.client.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: aws.String(queueURL),
			MaxNumberOfMessages: 10, WaitTimeSeconds: wait, MessageAttributeNames: []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}})
		if err != nil {
			e.tb.Fatal(err)
		}
		for _, m := range r.Messages {
			out = append(out, m)
			if _, err := e.client.DeleteMessage(ctx, &awssqs.DeleteMessageInput{QueueUrl: aws.String(queueURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
				e.tb.Fatal(err)
			}
		}
		return len(r.Messages)
	}
	for deadline := time.Now().Add(d); len(out) < n; {
		if time.Now().After(deadline) {
			e.tb.Fatalf("received %d of %d messages of %s", len(out), n, queueURL)
		}
		receive(1)
	}
	for receive(1) > 0 { // anything more (a repeat) within a second
	}
	return out
}

// Collect native dead letters redriven by goaws, fix one payload, replay
// them all through the binary to their work queue: every message arrives
// once, the edited one with its new body, each with its idempotency key
// and the replay headers, and none with the redacted Authorization.
//
// goaws v0.4.5 drops the message attributes of SendMessageBatch entries
// (the publisher's only call), so the replayed messages come back from
// the emulator without attributes. The binary talks to goaws through a
// recorder (proxy_test/publisher_test), and the attributes are asserted
// as they were sent on the wire; a server that returns them (real SQS, a
// later goaws) is asserted on what it returns.
func TestReplayEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the quarantine binary")
	}
	t.Parallel()
	const n = 20
	e := newEnv(t)
	work, workURL, _, dlqURL := nativeDeadLetters(e, "replay-e2e", n)
	rec := newRecorder(t, e.endpoint)
	p := testbin.Serve(t, testbin.Path(t), sqsReplayConfig(t, rec.url, dlqURL, work))
	api := p.API(p.Token)
	msgs := api.WaitMessages(t, work, n, 60*time.Second)
	eventually(t, 30*time.Second, "the dead-letter queue to be emptied", func() bool { return e.held(dlqURL) == 0 })

	byKey := map[string]testbin.Message{}
	for _, m := range msgs {
		byKey[m.IdempotencyKey] = m
	}
	if len(byKey) != n {
		t.Fatalf("%d distinct idempotency keys stored for %d messages", len(byKey), n)
	}

	// Fix the payload of order-0.
	one := byKey["order-0"]
	edited := `{"order_id":0,"currency":"EUR"}`
	api.MustDo(t, 200, "GET", "/api/v1/messages/"+one.ID, nil, &one)
	if one.Headers["Authorization"] != replay.RedactedValue {
		t.Errorf("Authorization stored as %q, want it redacted", one.Headers["Authorization"])
	}
	status, raw := api.DoHeaders(t, "PUT", "/api/v1/messages/"+one.ID+"/payload", map[string]string{"If-Match": `"` + one.PayloadSHA256 + `"`},
		map[string]any{"payload": json.RawMessage(edited), "reason": "currency was lowercase"}, nil)
	if status != 200 {
		t.Fatalf("edit: %d %s", status, raw)
	}

	var created struct {
		Replay testbin.Batch `json:"replay"`
	}
	api.MustDo(t, 201, "POST", "/api/v1/replays", map[string]any{
		"filter": map[string]any{"queue": []string{work}}, "expect_count": n, "rate": 200, "reason": "billing fixed",
	}, &created)
	batch := created.Replay.ID
	done := api.WaitReplay(t, batch, 60*time.Second, "completed")
	if done.Counts["published"] != n {
		t.Fatalf("counts %v, want %d published", done.Counts, n)
	}
	for _, it := range api.Items(t, batch, "") {
		if it.Outcome != "published" || len(it.DroppedHeaders) != 1 || it.DroppedHeaders[0] != "Authorization" {
			t.Errorf("item %s: outcome %s, dropped headers %v", it.MessageID, it.Outcome, it.DroppedHeaders)
		}
	}

	got := e.drainQueue(workURL, n, 30*time.Second)
	if len(got) != n {
		t.Fatalf("the work queue got %d messages, want %d", len(got), n)
	}
	seen := map[string]int{}
	for _, m := range got {
		body := aws.ToString(m.Body)
		var job struct {
			OrderID int `json:"order_id"`
		}
		if err := json.Unmarshal([]byte(body), &job); err != nil {
			t.Fatalf("body %q: %v", body, err)
		}
		key := fmt.Sprintf("order-%d", job.OrderID)
		seen[key]++
		orig, ok := byKey[key]
		if !ok {
			t.Fatalf("unexpected body %q", body)
		}
		want := fmt.Sprintf(`{"order_id":%d,"currency":"eur"}`, job.OrderID)
		if key == "order-0" {
			want = edited
		}
		if body != want {
			t.Errorf("%s arrived as %s, want %s", key, body, want)
		}
		attrs := rec.sent(body)
		if len(m.MessageAttributes) > 0 { // a server that keeps them
			attrs = map[string]string{}
			for k := range m.MessageAttributes {
				attrs[k] = attr(m, k)
			}
		}
		wantAttrs := map[string]string{
			replay.HeaderReplayID:       batch,
			replay.HeaderOriginalID:     orig.ID,
			replay.HeaderIdempotencyKey: key,
			"x-trace":                   fmt.Sprintf("t%d", job.OrderID),
		}
		for k, v := range wantAttrs {
			if attrs[k] != v {
				t.Errorf("%s: attribute %s = %q, want %q (attributes %v)", key, k, attrs[k], v, attrs)
			}
		}
		if attrs[replay.HeaderReplayedBy] == "" {
			t.Errorf("%s: attribute %s missing: %v", key, replay.HeaderReplayedBy, attrs)
		}
		for k, v := range attrs {
			if strings.EqualFold(k, "Authorization") || v == replay.RedactedValue {
				t.Errorf("%s: attribute %s=%q replayed", key, k, v)
			}
		}
		if len(attrs) != len(wantAttrs)+1 {
			t.Errorf("%s: attributes %v, want exactly %d", key, attrs, len(wantAttrs)+1)
		}
	}
	for key, c := range seen {
		if c != 1 {
			t.Errorf("%s arrived %d times", key, c)
		}
	}
	if len(seen) != n {
		t.Errorf("%d distinct idempotency keys arrived, want %d", len(seen), n)
	}
	for _, m := range api.WaitMessages(t, work, n, 60*time.Second) {
		if m.Status != "replayed" {
			t.Errorf("message %s is %s after the replay, want replayed", m.ID, m.Status)
		}
	}
	api.AuditVerifies(t)
}

// A replay redirected to a queue that does not exist completes with
// every item failed, naming the queue, and the messages quarantined
// again; nothing reaches the work queue.
func TestReplayMissingDestination(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the quarantine binary")
	}
	t.Parallel()
	const n = 5
	e := newEnv(t)
	work, workURL, _, dlqURL := nativeDeadLetters(e, "replay-missing", n)
	p := testbin.Serve(t, testbin.Path(t), sqsReplayConfig(t, e.endpoint, dlqURL, work))
	api := p.API(p.Token)
	api.WaitMessages(t, work, n, 60*time.Second)
	missing := work + "-nowhere"

	var created struct {
		Replay testbin.Batch `json:"replay"`
	}
	api.MustDo(t, 201, "POST", "/api/v1/replays", map[string]any{
		"filter": map[string]any{"queue": []string{work}}, "expect_count": n, "rate": 200, "reason": "wrong queue",
		"destination": map[string]any{"queue": missing},
	}, &created)
	batch := created.Replay.ID
	done := api.WaitReplay(t, batch, 60*time.Second, "failed") // never "completed": nothing was published
	if done.Counts["failed"] != n || done.Counts["published"] != 0 {
		t.Fatalf("counts %v, want %d failed", done.Counts, n)
	}
	failed := api.Items(t, batch, "&outcome=failed")
	if len(failed) != n {
		t.Fatalf("%d failed items listed, want %d", len(failed), n)
	}
	for _, it := range failed {
		if !strings.Contains(it.Reason, missing) || !strings.Contains(it.Destination, missing) {
			t.Errorf("item %s: reason %q, destination %q: want them to name %s", it.MessageID, it.Reason, it.Destination, missing)
		}
	}
	for _, m := range api.WaitMessages(t, work, n, 60*time.Second) {
		if m.Status != "quarantined" {
			t.Errorf("message %s is %s, want quarantined again", m.ID, m.Status)
		}
	}
	if d := e.held(workURL); d != 0 {
		t.Errorf("the work queue holds %d messages", d)
	}
	api.AuditVerifies(t)
}

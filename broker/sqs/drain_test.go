package sqs

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
)

// preparer takes the idempotency key of queue "jobs" from /order_id.
var preparer = &collect.Preparer{Idempotency: []collect.IdempotencyRule{{Queues: []string{"jobs"}, JSONPointer: "/order_id", Prefix: "order:"}}}

// envelopeBody is the failure envelope a worker publishes for job i.
func envelopeBody(i int) string {
	b, _ := json.Marshal(map[string]any{
		"envelope": collect.EnvelopeV1,
		"job": map[string]any{"id": fmt.Sprintf("job-%d", i), "name": "send_invoice", "queue": "invoices",
			"idempotency_key": fmt.Sprintf("inv-%d", i), "attempts": 5, "payload": map[string]any{"invoice": i}},
		"failure": map[string]any{"class": "permanent", "reason": "card declined", "failed_at": "2026-11-29T11:00:00Z"},
	})
	return string(b)
}

func TestDrainStoresEachMessageOnce(t *testing.T) {
	t.Parallel()
	const n = 300
	cases := []struct {
		name   string
		body   func(i int) string
		idOf   func(m *quarantine.Message, sqsID string) string // what MessageID must be
		check  func(t *testing.T, i int, m *quarantine.Message)
		native bool
	}{
		{name: "native", native: true, body: func(i int) string { return fmt.Sprintf(`{"order_id":"o-%d"}`, i) },
			check: func(t *testing.T, i int, m *quarantine.Message) {
				// Sent to the dead-letter queue directly: receives unknown.
				if m.Queue != "jobs" || m.FailureClass != quarantine.ClassExhausted || m.Attempts != 0 ||
					!strings.HasPrefix(m.Reason, "moved to DLQ by SQS redrive (receives unknown") || m.IdempotencyKey != fmt.Sprintf("order:o-%d", i) {
					t.Errorf("message %d: queue %q class %q attempts %d reason %q key %q", i, m.Queue, m.FailureClass, m.Attempts, m.Reason, m.IdempotencyKey)
				}
			}},
		{name: "envelope", body: envelopeBody,
			check: func(t *testing.T, i int, m *quarantine.Message) {
				if m.Queue != "invoices" || m.FailureClass != quarantine.ClassPermanent || m.Attempts != 5 || m.JobName != "send_invoice" ||
					m.Reason != "card declined" || m.IdempotencyKey != fmt.Sprintf("inv-%d", i) || string(m.Payload) != fmt.Sprintf(`{"invoice":%d}`, i) {
					t.Errorf("message %d: queue %q class %q attempts %d reason %q key %q payload %s", i, m.Queue, m.FailureClass, m.Attempts, m.Reason, m.IdempotencyKey, m.Payload)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			_, url := e.queue("drain-"+tc.name, nil)
			bs := make([]string, n)
			for i := range bs {
				bs[i] = tc.body(i)
			}
			ids := e.send(url, bs, nil)
			st := sqliteStore(t)
			r := startCollector(t, "dlq-"+tc.name, testConfig(e.endpoint, url), st, preparer)
			eventually(t, 30*time.Second, "the queue to drain", func() bool { return e.depth(url) == 0 })
			r.stop()

			msgs := allMessages(t, st, true)
			index := map[string]int{} // expected MessageID -> i
			want := make([]string, n)
			for i := range bs {
				want[i] = ids[i]
				if !tc.native {
					want[i] = fmt.Sprintf("job-%d", i)
				}
				index[want[i]] = i
			}
			exactlyOnce(t, msgs, want, func(m *quarantine.Message) string { return m.MessageID })
			for _, m := range msgs {
				if m.Source != "dlq-"+tc.name || m.SourceKind != quarantine.SourceSQS {
					t.Fatalf("source %q kind %q", m.Source, m.SourceKind)
				}
				tc.check(t, index[m.MessageID], m)
			}
			if s := r.c.Stats(); s.Stored != n || s.Errors[collect.ErrAck] != 0 {
				t.Fatalf("stats: %+v", s)
			}
		})
	}
}

// TestDrainNativeRedrive lets SQS itself move jobs to the dead-letter
// queue (a RedrivePolicy with maxReceiveCount 2 and a worker that never
// deletes), then drains it. goaws restarts ApproximateReceiveCount (and
// the timestamps) on the move, so the stored attempts must not claim a
// count it did not report: either the worker's true receives, or 0 with
// a reason that says they are unknown; never the 1 goaws reports.
func TestDrainNativeRedrive(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	_, dlq := e.queue("redrive-dlq", nil)
	attrs, err := e.client.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: aws.String(dlq),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	policy := fmt.Sprintf(`{"maxReceiveCount":"2","deadLetterTargetArn":%q}`, attrs.Attributes["QueueArn"])
	_, src := e.queue("redrive-src", map[string]string{"VisibilityTimeout": "1", "RedrivePolicy": policy})
	start := time.Now()
	ids := e.send(src, bodies(20, "redrive"), nil)

	// A failing worker: receives and never deletes, until SQS has moved
	// everything to the dead-letter queue.
	receives := map[string]int{}
	eventually(t, 60*time.Second, "redrive to the dead-letter queue", func() bool {
		out, err := e.client.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: aws.String(src), MaxNumberOfMessages: 10})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			receives[*m.MessageId]++
		}
		return e.depth(src) == 0
	})

	st := sqliteStore(t)
	cfg := testConfig(e.endpoint, dlq)
	cfg.SourceQueue = "redrive-src"
	r := startCollector(t, "dlq-redrive", cfg, st, nil)
	eventually(t, 30*time.Second, "the dead-letter queue to drain", func() bool { return e.depth(dlq) == 0 })
	r.stop()
	msgs := allMessages(t, st, true)
	exactlyOnce(t, msgs, ids, func(m *quarantine.Message) string { return m.MessageID })
	for _, m := range msgs {
		if m.Queue != "redrive-src" || m.FailureClass != quarantine.ClassExhausted || !strings.HasPrefix(string(m.Payload), `{"order_id":"redrive-`) {
			t.Fatalf("queue %q class %q payload %s", m.Queue, m.FailureClass, m.Payload)
		}
		n := receives[m.MessageID]
		if n < 2 {
			t.Fatalf("message %s was received %d times before the redrive, want at least maxReceiveCount", m.MessageID, n)
		}
		counted := m.Attempts == n && m.Reason == fmt.Sprintf("moved to DLQ by SQS redrive after %d receives", n)
		unknown := m.Attempts == 0 && m.Reason == "moved to DLQ by SQS redrive (receives unknown: ApproximateReceiveCount 1 on the DLQ)"
		if !counted && !unknown {
			t.Errorf("message %s received %d times: attempts %d, reason %q", m.MessageID, n, m.Attempts, m.Reason)
		}
		if m.FailedAt.Before(start.Add(-time.Second)) || m.FailedAt.After(m.CollectedAt) ||
			(m.FirstFailedAt != nil && m.FirstFailedAt.After(m.FailedAt)) || (m.EnqueuedAt != nil && m.EnqueuedAt.After(m.FailedAt)) {
			t.Errorf("message %s: enqueued %v first failed %v failed %v collected %v", m.MessageID, m.EnqueuedAt, m.FirstFailedAt, m.FailedAt, m.CollectedAt)
		}
	}
}

func TestTwoCollectorsOneQueue(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, url := e.queue("two", nil)
	st := sqliteStore(t)
	cfg := testConfig(e.endpoint, url)
	cfg.Receivers = 2
	// Two replicas of one configured collector: same name, same queue.
	a := startCollector(t, "dlq-two", cfg, st, nil)
	b := startCollector(t, "dlq-two", cfg, st, nil)
	ids := e.send(url, bodies(1000, "two"), nil)
	eventually(t, 60*time.Second, "the queue to drain", func() bool { return e.depth(url) == 0 })
	a.stop()
	b.stop()
	exactlyOnce(t, allMessages(t, st, false), ids, func(m *quarantine.Message) string { return m.MessageID })
	sa, sb := a.c.Stats(), b.c.Stats()
	if sa.Received == 0 || sb.Received == 0 || sa.Stored+sb.Stored != 1000 {
		t.Fatalf("received %d and %d, stored %d+%d: want both to share the 1000", sa.Received, sb.Received, sa.Stored, sb.Stored)
	}
}

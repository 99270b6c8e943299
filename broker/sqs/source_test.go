package sqs

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
)

// receiveAll calls Receive until n deliveries came or d passed.
func receiveAll(t *testing.T, src *Source, n int, d time.Duration) []collect.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var out []collect.Delivery
	for len(out) < n {
		ds, err := src.Receive(ctx, n-len(out), 50*time.Millisecond)
		if err != nil {
			t.Fatalf("after %d of %d deliveries: %v", len(out), n, err)
		}
		out = append(out, ds...)
	}
	return out
}

func TestSourceReceivesDecodesAndDeletes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, url := e.queue("src-basic", nil)
	attrs := map[string]types.MessageAttributeValue{
		"x-idempotency-key": {DataType: aws.String("String"), StringValue: aws.String("key-1")},
		"retries":           {DataType: aws.String("Number"), StringValue: aws.String("3")},
		"blob":              {DataType: aws.String("Binary"), BinaryValue: []byte{0, 1, 2}},
	}
	ids := e.send(url, bodies(25, "basic"), attrs)
	src, err := NewSource("dlq-basic", testConfig(e.endpoint, url), quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })

	before := time.Now()
	ds := receiveAll(t, src, 25, 20*time.Second)
	byID := map[string]*quarantine.Message{}
	for _, d := range ds {
		m := d.Message
		if _, dup := byID[m.MessageID]; dup {
			t.Fatalf("message %s delivered twice", m.MessageID)
		}
		byID[m.MessageID] = m
		if m.Source != "dlq-basic" || m.SourceKind != quarantine.SourceSQS || m.Queue != "jobs" {
			t.Errorf("origin = %q %q %q, want dlq-basic sqs jobs", m.Source, m.SourceKind, m.Queue)
		}
		if m.DedupeKey != m.MessageID || m.FailureClass != quarantine.ClassExhausted || m.ContentType != collect.ContentTypeJSON {
			t.Errorf("dedupe %q class %q type %q", m.DedupeKey, m.FailureClass, m.ContentType)
		}
		// Sent to the dead-letter queue directly: no receives to count,
		// and SentTimestamp is when it entered the dead-letter queue.
		if m.Attempts != 0 || !strings.Contains(m.Reason, "receives unknown") || m.FailedAt.Before(before.Add(-time.Second)) ||
			m.FailedAt.After(time.Now()) || m.EnqueuedAt != nil {
			t.Errorf("attempts %d reason %q failed_at %v enqueued_at %v", m.Attempts, m.Reason, m.FailedAt, m.EnqueuedAt)
		}
		want := map[string]string{"x-idempotency-key": "key-1", "retries": "3", "blob": `"AAEC"`}
		for k, v := range want {
			if m.Headers[k] != v {
				t.Errorf("header %s = %q, want %q", k, m.Headers[k], v)
			}
		}
	}
	for _, id := range ids {
		if byID[id] == nil {
			t.Errorf("message %s not delivered", id)
		}
	}
	if err := src.Ack(context.Background(), ds); err != nil {
		t.Fatal(err)
	}
	if n := e.depth(url); n != 0 {
		t.Fatalf("queue holds %d messages after the ack, want 0", n)
	}
}

func TestSourceAckReportsStaleReceipts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, url := e.queue("src-stale", nil)
	e.send(url, bodies(3, "stale"), nil)
	src, err := NewSource("dlq-stale", testConfig(e.endpoint, url), quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	ds := receiveAll(t, src, 3, 20*time.Second)
	if err := src.Ack(context.Background(), ds); err != nil {
		t.Fatal(err)
	}
	// The receipts are spent: a second Ack cannot be confirmed.
	err = src.Ack(context.Background(), ds)
	if quarantine.ErrorCode(err) != quarantine.EUNAVAILABLE {
		t.Fatalf("second ack: %v, want EUNAVAILABLE", err)
	}
	if err := src.Ack(context.Background(), []collect.Delivery{{Handle: "foreign"}}); quarantine.ErrorCode(err) != quarantine.EINVALID {
		t.Fatalf("foreign handle: %v, want EINVALID", err)
	}
}

func TestSourceExtendKeepsHeldMessagesInvisible(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, url := e.queue("src-extend", map[string]string{"VisibilityTimeout": "2"})
	ids := e.send(url, bodies(2, "extend"), nil)
	cfg := testConfig(e.endpoint, url)
	cfg.VisibilityTimeout = 2 * time.Second
	src, err := NewSource("dlq-extend", cfg, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	if src.ExtendEvery() <= 0 || src.ExtendEvery() >= cfg.VisibilityTimeout {
		t.Fatalf("ExtendEvery = %s", src.ExtendEvery())
	}
	ds := receiveAll(t, src, 2, 20*time.Second)

	// Hold the batch for twice the visibility timeout, extending it: no
	// other receiver may see the messages meanwhile.
	other, err := NewSource("dlq-extend-2", cfg, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	go func() {
		tk := time.NewTicker(src.ExtendEvery())
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
				if err := src.Extend(ctx, ds); err != nil && ctx.Err() == nil {
					t.Errorf("extend: %v", err)
				}
			}
		}
	}()
	got, err := other.Receive(ctx, 10, 10*time.Millisecond)
	if len(got) > 0 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("another receiver got %d messages (%v) while they were extended", len(got), err)
	}
	if err := src.Ack(context.Background(), ds); err != nil {
		t.Fatalf("ack after holding: %v", err)
	}
	if n := e.depth(url); n != 0 || len(ids) != 2 {
		t.Fatalf("queue holds %d messages, want 0", n)
	}
}

func TestSourceCloseReleasesPrefetched(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, url := e.queue("src-close", nil) // visibility 30s: only a release makes them visible soon
	e.send(url, bodies(30, "close"), nil)
	cfg := testConfig(e.endpoint, url)
	src, err := NewSource("dlq-close", cfg, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	ds := receiveAll(t, src, 5, 20*time.Second)
	if err := src.Ack(context.Background(), ds); err != nil {
		t.Fatal(err)
	}
	// A receiver holds a batch fetched ahead, not handed out: Close must
	// release it (without one the test would prove nothing).
	eventually(t, 10*time.Second, "a receiver holding a prefetched batch", func() bool { return src.waiting.Load() > 0 })
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Receive(context.Background(), 1, 0); quarantine.ErrorCode(err) != quarantine.ECONFLICT {
		t.Fatalf("Receive after Close: %v, want ECONFLICT", err)
	}
	// Everything not acknowledged is visible again at once.
	next, err := NewSource("dlq-close-2", cfg, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { next.Close() })
	rest := receiveAll(t, next, 25, 5*time.Second)
	if err := next.Ack(context.Background(), rest); err != nil {
		t.Fatal(err)
	}
	if n := e.depth(url); n != 0 {
		t.Fatalf("queue holds %d messages, want 0", n)
	}
}

func TestSourceReportsMissingQueue(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	src, err := NewSource("dlq-missing", testConfig(e.endpoint, e.endpoint+"/"+goawsAccount+"/no-such-queue-xyz"), quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = src.Receive(ctx, 10, 0)
	if quarantine.ErrorCode(err) != quarantine.ENOTFOUND {
		t.Fatalf("Receive on a missing queue: %v, want ENOTFOUND", err)
	}
}

func TestSourceCloseEndsABlockedReceive(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, url := e.queue("src-block", nil)
	src, err := NewSource("dlq-block", testConfig(e.endpoint, url), quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := src.Receive(context.Background(), 10, 0)
		errc <- err
	}()
	// Close only once Receive waits for messages: a Close before it would
	// test the closed check at its start, not the blocked wait.
	eventually(t, 10*time.Second, "Receive blocked on an empty queue", func() bool { return src.blocked.Load() == 1 })
	src.Close()
	select {
	case err := <-errc:
		if quarantine.ErrorCode(err) != quarantine.ECONFLICT {
			t.Fatalf("Receive: %v, want ECONFLICT", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Receive still blocked after Close")
	}
}

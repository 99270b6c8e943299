package rabbitmq

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/quarantine-dev/quarantine/internal/testbin"
)

// replayedMsg is what a consumer of the work queue got.
type replayedMsg struct {
	body    string
	headers amqp.Table
	id      string
	ctype   string
	at      time.Time
}

// consumeN takes n messages from queue (acknowledging them) within d, and
// then waits quiet for more: it returns everything that arrived.
func (b *testBroker) consumeN(queue string, n int, d, quiet time.Duration) []replayedMsg {
	b.t.Helper()
	ch, err := b.conn.Channel()
	if err != nil {
		b.t.Fatal(err)
	}
	defer ch.Close()
	ds, err := ch.Consume(queue, "", true, false, false, false, nil)
	if err != nil {
		b.t.Fatal(err)
	}
	var out []replayedMsg
	timeout := time.After(d)
	for len(out) < n {
		select {
		case m := <-ds:
			out = append(out, replayedMsg{string(m.Body), m.Headers, m.MessageId, m.ContentType, time.Now()})
		case <-timeout:
			b.t.Fatalf("consumed %d of %d messages of %s", len(out), n, queue)
		}
	}
	for {
		select {
		case m := <-ds:
			out = append(out, replayedMsg{string(m.Body), m.Headers, m.MessageId, m.ContentType, time.Now()})
		case <-time.After(quiet):
			return out
		}
	}
}

// deadLetters makes n native dead letters: published to a work queue
// with an idempotency key and a secret header, rejected by a worker, and
// dead-lettered by RabbitMQ into dlq with x-death.
func deadLetters(b *testBroker, n int) (work, dlq string) {
	dlq = b.failureQueue(nil)
	work = b.workQueue(dlq, nil)
	msgs := make([]amqp.Publishing, n)
	for i := range msgs {
		msgs[i] = amqp.Publishing{
			ContentType: "application/json", MessageId: fmt.Sprintf("orig-%d", i),
			Headers: amqp.Table{"x-idempotency-key": fmt.Sprintf("order-%d", i), "Authorization": "Bearer s3cret", "x-trace": fmt.Sprintf("t%d", i)},
			Body:    []byte(fmt.Sprintf(`{"order_id":%d,"currency":"eur"}`, i)),
		}
	}
	b.publish(work, msgs...)
	b.settle(work, n, false)
	b.waitDepth(dlq, n)
	return work, dlq
}

func replayConfig(t *testing.T, dlq, work, extra string) string {
	dir := t.TempDir()
	config := filepath.Join(dir, "quarantine.yaml")
	yaml := fmt.Sprintf(`database: "sqlite:%s"
listen: 127.0.0.1:0
collectors:
  - name: orders
    kind: rabbitmq
    url: %q
    queue: %q
idempotency:
  - queues: [%q]
    header: x-idempotency-key
%s`, filepath.Join(dir, "q.db"), testURL(), dlq, work, extra)
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return config
}

// Collect native dead letters, fix one payload, replay them all through
// the binary: the worker queue gets the edited payload, the original
// idempotency keys and the replay headers, and no bookkeeping or masked
// header.
func TestReplayEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the quarantine binary")
	}
	t.Parallel()
	const n = 20
	b := newBroker(t)
	work, dlq := deadLetters(b, n)
	p := testbin.Serve(t, testbin.Path(t), replayConfig(t, dlq, work, "replay: {canary: 0}\n"))
	api := p.API(p.Token)
	msgs := api.WaitMessages(t, work, n, 30*time.Second)
	b.waitDepth(dlq, 0)
	// The binary's /metrics counts them, and the age of the oldest.
	_, before := api.Do(t, "GET", "/metrics", nil, nil)
	if want := fmt.Sprintf(`quarantine_messages{owner="",queue=%q,status="quarantined"} %d`, work, n); !strings.Contains(string(before), want) {
		t.Errorf("/metrics lacks %s", want)
	}
	if !regexp.MustCompile(`(?m)^quarantine_oldest_message_age_seconds\{owner="",queue="` + regexp.QuoteMeta(work) + `"\} [0-9.e+]+$`).Match(before) {
		t.Errorf("/metrics has no age for queue %s", work)
	}

	// Fix the payload of order-0.
	var one testbin.Message
	edited := fmt.Sprintf(`{"order_id":%d,"currency":"EUR"}`, 0)
	for _, m := range msgs {
		if m.IdempotencyKey == "order-0" {
			one = m
		}
	}
	api.MustDo(t, 200, "GET", "/api/v1/messages/"+one.ID, nil, &one)
	status, raw := api.DoHeaders(t, "PUT", "/api/v1/messages/"+one.ID+"/payload", map[string]string{"If-Match": `"` + one.PayloadSHA256 + `"`},
		map[string]any{"payload": json.RawMessage(edited), "reason": "currency was lowercase"}, nil)
	if status != 200 {
		t.Fatalf("edit: %d %s", status, raw)
	}

	var created struct {
		Replay testbin.Batch `json:"replay"`
	}
	api.MustDo(t, 201, "POST", "/api/v1/replays", map[string]any{
		"filter": map[string]any{"queue": []string{work}}, "expect_count": n, "rate": 200, "reason": "inventory fixed",
	}, &created)
	done := api.WaitReplay(t, created.Replay.ID, 30*time.Second, "completed")
	if done.Counts["published"] != n {
		t.Fatalf("counts %v", done.Counts)
	}
	got := b.consumeN(work, n, 30*time.Second, 300*time.Millisecond)
	if len(got) != n {
		t.Fatalf("the work queue got %d messages, want %d", len(got), n)
	}
	keys := map[string]bool{}
	for _, m := range got {
		key, _ := m.headers["x-idempotency-key"].(string)
		keys[key] = true
		if key == "order-0" && m.body != edited {
			t.Errorf("order-0 arrived as %s, want the edited %s", m.body, edited)
		}
		if m.ctype != "application/json" || m.id == "" || m.id == "orig-0" {
			t.Errorf("content type %q, message id %q", m.ctype, m.id)
		}
		for _, h := range []string{"x-quarantine-replay-id", "x-quarantine-replayed-by", "x-quarantine-original-id"} {
			if v, _ := m.headers[h].(string); v == "" {
				t.Errorf("header %s missing: %v", h, m.headers)
			}
		}
		for _, h := range []string{"x-death", "x-first-death-queue", "x-first-death-reason", "Authorization"} {
			if _, ok := m.headers[h]; ok {
				t.Errorf("header %s replayed: %v", h, m.headers)
			}
		}
	}
	if len(keys) != n {
		t.Errorf("%d distinct idempotency keys arrived, want %d", len(keys), n)
	}
	_, metrics := api.Do(t, "GET", "/metrics", nil, nil)
	for _, want := range []string{
		`quarantine_replay_batches{state="completed"} 1`,
		fmt.Sprintf(`quarantine_replay_published_total{outcome="published",queue=%q} %d`, work, n),
	} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	var v struct {
		OK bool `json:"ok"`
	}
	api.MustDo(t, 200, "GET", "/api/v1/audit/verify", nil, &v)
	if !v.OK {
		t.Error("the audit chain does not verify")
	}
}

// SIGKILL of the binary while it replays, repeatedly, then a restart:
// the batch completes, every message reached the work queue, repeats are
// few and carry the same idempotency key and transport id.
func TestReplayProcessSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the quarantine binary")
	}
	t.Parallel()
	const n, rate, kills = 600, 300, 3
	b := newBroker(t)
	work, dlq := deadLetters(b, n)
	config := replayConfig(t, dlq, work, "replay: {canary: 0, lease: 2s, poll: 100ms}\n")
	bin := testbin.Path(t)
	p := testbin.Serve(t, bin, config)
	token := p.Token
	api := p.API(token)
	api.WaitMessages(t, work, n, 30*time.Second)
	var created struct {
		Replay testbin.Batch `json:"replay"`
	}
	api.MustDo(t, 201, "POST", "/api/v1/replays", map[string]any{
		"filter": map[string]any{"queue": []string{work}}, "expect_count": n, "rate": rate, "reason": "kill test",
	}, &created)
	id := created.Replay.ID
	for i := 0; i < kills; i++ {
		time.Sleep(time.Duration(150+rand.IntN(250)) * time.Millisecond)
		p.Kill()
		p = testbin.Serve(t, bin, config)
		api = p.API(token)
	}
	done := api.WaitReplay(t, id, 60*time.Second, "completed")
	if done.Counts["published"] != n {
		t.Fatalf("counts %v, want %d published", done.Counts, n)
	}
	got := b.consumeN(work, n, 30*time.Second, 500*time.Millisecond)
	perKey := map[string][]replayedMsg{}
	for _, m := range got {
		key, _ := m.headers["x-idempotency-key"].(string)
		perKey[key] = append(perKey[key], m)
	}
	if len(perKey) != n {
		t.Fatalf("%d distinct keys reached the work queue, want %d (of %d deliveries)", len(perKey), n, len(got))
	}
	extra := len(got) - n
	// A kill repeats at most the chunk in flight: rate/5 messages.
	if extra > kills*rate/5 {
		t.Errorf("%d repeats after %d kills, more than a chunk each", extra, kills)
	}
	for key, ms := range perKey {
		for _, m := range ms[1:] {
			if m.id != ms[0].id || m.body != ms[0].body {
				t.Errorf("key %s repeated with another transport id or body: %q/%q", key, ms[0].id, m.id)
			}
		}
	}
	t.Logf("%d deliveries for %d messages after %d kills", len(got), n, kills)
}

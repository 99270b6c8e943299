package nats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarantine-dev/quarantine/collect"
	"github.com/quarantine-dev/quarantine/internal/testbin"
	"github.com/quarantine-dev/quarantine/replay"
)

// replayEnvelope is the failure envelope a worker publishes for job i of
// queue (the subject the job was consumed from): an idempotency key, the
// job's headers as the worker saw them (a secret Authorization, a trace,
// and the Nats-Msg-Id the application published it with), and a JSON
// payload.
func replayEnvelope(i int, queue string) []byte {
	b, _ := json.Marshal(map[string]any{
		"envelope": collect.EnvelopeV1,
		"job": map[string]any{
			"id": fmt.Sprintf("job-%d", i), "name": "render_report", "queue": queue,
			"idempotency_key": fmt.Sprintf("report-%d", i), "attempts": 5,
			"headers": map[string]string{"Authorization": "Bearer s3cret", "x-trace": fmt.Sprintf("t%d", i),
				nats.MsgIdHdr: fmt.Sprintf("orig-%d", i)},
			"payload": map[string]any{"report": i, "format": "pdf"},
		},
		"failure": map[string]any{"class": "exhausted", "reason": "renderer timed out", "failed_at": "2026-11-29T11:00:00Z"},
	})
	return b
}

// replaySetup is an embedded NATS server with a work stream (WORK_….>,
// where the jobs run and replays land) and a failure stream on which a
// worker published n envelopes of jobs of subject, and the binary
// collecting that failure stream.
type replaySetup struct {
	js      jetstream.JetStream
	work    string // the work stream
	subject string // the jobs' subject: their queue
	api     testbin.API
}

func newReplaySetup(t *testing.T, n int) *replaySetup {
	t.Helper()
	srv := startEmbedded(t)
	_, js := jsClient(t, srv.url())
	work := uniq("WORK")
	newStream(t, js, jetstream.StreamConfig{Name: work, Storage: jetstream.FileStorage, Duplicates: 2 * time.Minute})
	subject := work + ".reports"
	failed := uniq("FAILED")
	newStream(t, js, jetstream.StreamConfig{Name: failed, Storage: jetstream.FileStorage})
	for i := range n {
		if _, err := js.PublishAsync(failed+".reports", replayEnvelope(i, subject)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(30 * time.Second):
		t.Fatal("publishing did not complete")
	}

	dir := t.TempDir()
	config := filepath.Join(dir, "quarantine.yaml")
	yaml := fmt.Sprintf(`database: "sqlite:%s"
listen: 127.0.0.1:0
collectors:
  - name: reports-nats
    kind: nats
    url: %s
    stream: %s
    linger: 20ms
replay: {canary: 0, poll: 100ms}
`, filepath.Join(dir, "q.db"), srv.url(), failed)
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	p := testbin.Serve(t, testbin.Path(t), config)
	s := &replaySetup{js: js, work: work, subject: subject, api: p.API(p.Token)}
	eventually(t, 30*time.Second, "the failure stream drained", func() bool {
		return consumerDrained(t, js, failed, "quarantine-reports-nats")
	})
	return s
}

// messages waits until the service lists n messages of the jobs' queue.
func (s *replaySetup) messages(t *testing.T, n int) []testbin.Message {
	t.Helper()
	var page struct {
		Items []testbin.Message `json:"items"`
	}
	eventually(t, 30*time.Second, fmt.Sprintf("%d messages of %s listed", n, s.subject), func() bool {
		s.api.MustDo(t, 200, "GET", "/api/v1/messages?limit=1000&queue="+url.QueryEscape(s.subject), nil, &page)
		return len(page.Items) == n
	})
	return page.Items
}

// replay creates a batch of the n messages of the jobs' queue (more:
// more members of the request) and waits until it completed.
func (s *replaySetup) replay(t *testing.T, n int, more map[string]any) testbin.Batch {
	t.Helper()
	return s.replayUntil(t, n, more, "completed")
}

// replayUntil is replay, waiting for the batch to reach state.
func (s *replaySetup) replayUntil(t *testing.T, n int, more map[string]any, state string) testbin.Batch {
	t.Helper()
	req := map[string]any{"filter": map[string]any{"queue": []string{s.subject}}, "expect_count": n, "rate": 200, "reason": "renderer fixed"}
	for k, v := range more {
		req[k] = v
	}
	var created struct {
		Replay testbin.Batch `json:"replay"`
	}
	s.api.MustDo(t, 201, "POST", "/api/v1/replays", req, &created)
	var b testbin.Batch
	eventually(t, 30*time.Second, "the replay "+state, func() bool {
		s.api.MustDo(t, 200, "GET", "/api/v1/replays/"+created.Replay.ID, nil, &b)
		return b.State == state
	})
	return b
}

// consume reads the work stream from its start with an ordered consumer,
// as a worker would, until n messages came (failing after 30 s), then
// until nothing more comes for a second: it returns everything.
func (s *replaySetup) consume(t *testing.T, n int) []jetstream.Msg {
	t.Helper()
	ctx := context.Background()
	c, err := s.js.OrderedConsumer(ctx, s.work, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var out []jetstream.Msg
	for deadline := time.Now().Add(patience * 30 * time.Second); ; {
		wait := time.Second
		if len(out) < n {
			if time.Now().After(deadline) {
				t.Fatalf("consumed %d of %d messages of %s", len(out), n, s.work)
			}
			wait = 2 * time.Second
		}
		batch, err := c.Fetch(n, jetstream.FetchMaxWait(wait))
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for m := range batch.Messages() {
			out = append(out, m)
			got++
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			t.Fatal(err)
		}
		if got == 0 && len(out) >= n {
			return out
		}
	}
}

// Collect envelopes from a failure stream, fix one payload, replay them
// all through the binary to their subject: the work stream gets each once,
// the edited one with its new payload, each with its idempotency key, the
// replay headers and Nats-Msg-Id replay-<batch>-<message>, and neither the
// redacted Authorization nor the job's old Nats-Msg-Id.
func TestReplayEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the quarantine binary")
	}
	t.Parallel()
	const n = 20
	s := newReplaySetup(t, n)
	msgs := s.messages(t, n)
	byKey := map[string]testbin.Message{}
	for _, m := range msgs {
		byKey[m.IdempotencyKey] = m
	}
	if len(byKey) != n {
		t.Fatalf("%d distinct idempotency keys stored for %d messages", len(byKey), n)
	}

	// Fix the payload of report-0.
	one := byKey["report-0"]
	edited := `{"format":"PDF","report":0}`
	s.api.MustDo(t, 200, "GET", "/api/v1/messages/"+one.ID, nil, &one)
	if one.Headers["Authorization"] != replay.RedactedValue {
		t.Errorf("Authorization stored as %q, want it redacted", one.Headers["Authorization"])
	}
	status, raw := s.api.DoHeaders(t, "PUT", "/api/v1/messages/"+one.ID+"/payload", map[string]string{"If-Match": `"` + one.PayloadSHA256 + `"`},
		map[string]any{"payload": json.RawMessage(edited), "reason": "format must be upper case"}, nil)
	if status != 200 {
		t.Fatalf("edit: %d %s", status, raw)
	}

	done := s.replay(t, n, nil)
	if done.Counts["published"] != n {
		t.Fatalf("counts %v, want %d published", done.Counts, n)
	}
	for _, it := range s.api.Items(t, done.ID, "") {
		if it.Outcome != "published" || len(it.DroppedHeaders) != 1 || it.DroppedHeaders[0] != "Authorization" {
			t.Errorf("item %s: outcome %s, dropped headers %v", it.MessageID, it.Outcome, it.DroppedHeaders)
		}
	}

	got := s.consume(t, n)
	seen := map[string]int{}
	for _, m := range got {
		h := m.Headers()
		key := h.Get(replay.HeaderIdempotencyKey)
		seen[key]++
		orig, ok := byKey[key]
		if !ok {
			t.Fatalf("unexpected message with key %q: %s", key, m.Data())
		}
		var i int
		if _, err := fmt.Sscanf(key, "report-%d", &i); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf(`{"format":"pdf","report":%d}`, i)
		if key == "report-0" {
			want = edited
		}
		if string(m.Data()) != want || m.Subject() != s.subject {
			t.Errorf("%s arrived on %s as %s, want %s on %s", key, m.Subject(), m.Data(), want, s.subject)
		}
		wantHeaders := map[string]string{
			replay.HeaderReplayID:   done.ID,
			replay.HeaderOriginalID: orig.ID,
			replay.HeaderJobName:    "render_report",
			"x-trace":               fmt.Sprintf("t%d", i),
			"Content-Type":          "application/json",
			nats.MsgIdHdr:           "replay-" + done.ID + "-" + orig.ID,
		}
		for k, v := range wantHeaders {
			if got := h.Values(k); len(got) != 1 || got[0] != v {
				t.Errorf("%s: header %s = %q, want %q (headers %v)", key, k, got, v, h)
			}
		}
		if h.Get(replay.HeaderReplayedBy) == "" {
			t.Errorf("%s: header %s missing: %v", key, replay.HeaderReplayedBy, h)
		}
		if len(h) != len(wantHeaders)+2 { // and the key and replayed-by
			t.Errorf("%s: headers %v, want exactly %d", key, h, len(wantHeaders)+2)
		}
		for k, vs := range h {
			if strings.EqualFold(k, "Authorization") || strings.Contains(strings.Join(vs, ","), replay.RedactedValue) {
				t.Errorf("%s: header %s=%q replayed", key, k, vs)
			}
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
	for _, m := range s.messages(t, n) {
		if m.Status != "replayed" {
			t.Errorf("message %s is %s after the replay, want replayed", m.ID, m.Status)
		}
	}
	s.api.AuditVerifies(t)
}

// A replay redirected to a subject no stream captures ends failed (never
// completed, which would read as a success) with every item failed,
// naming the subject, and the messages quarantined again; nothing
// reaches the work stream.
func TestReplayMissingDestination(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the quarantine binary")
	}
	t.Parallel()
	const n = 5
	s := newReplaySetup(t, n)
	s.messages(t, n)
	missing := uniq("NOWHERE") + ".reports"
	done := s.replayUntil(t, n, map[string]any{"destination": map[string]any{"queue": missing}}, "failed")
	if done.Counts["failed"] != n || done.Counts["published"] != 0 {
		t.Fatalf("counts %v, want %d failed", done.Counts, n)
	}
	failed := s.api.Items(t, done.ID, "&outcome=failed")
	if len(failed) != n {
		t.Fatalf("%d failed items listed, want %d", len(failed), n)
	}
	for _, it := range failed {
		if !strings.Contains(it.Reason, "no stream captures subject") || !strings.Contains(it.Reason, missing) ||
			!strings.Contains(it.Destination, missing) {
			t.Errorf("item %s: reason %q, destination %q: want them to name %s", it.MessageID, it.Reason, it.Destination, missing)
		}
	}
	for _, m := range s.messages(t, n) {
		if m.Status != "quarantined" {
			t.Errorf("message %s is %s, want quarantined again", m.ID, m.Status)
		}
	}
	if c := streamMsgs(t, s.js, s.work); c != 0 {
		t.Errorf("the work stream holds %d messages", c)
	}
	s.api.AuditVerifies(t)
}

package webhook

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
	"github.com/quarantine-dev/quarantine/replay"
)

// replayMsgs returns n replay messages to queue, each with its
// quarantined message.
func replayMsgs(run, queue string, n int) []replay.Outgoing {
	out := make([]replay.Outgoing, n)
	failed := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for i := range out {
		key := fmt.Sprintf("work:%s:%d", run, i)
		out[i] = replay.Outgoing{
			Queue: queue, MessageID: fmt.Sprintf("rb-%s-%d", run, i), IdempotencyKey: key,
			JobName: "work.do", ContentType: "application/json",
			Payload: fmt.Appendf(nil, `{"run": %q, "n": %d}`, run, i),
			Headers: map[string]string{
				replay.HeaderReplayID:       "rb-" + run,
				replay.HeaderReplayedBy:     "alice",
				replay.HeaderOriginalID:     fmt.Sprintf("orig-%d", i),
				replay.HeaderIdempotencyKey: key,
				replay.HeaderJobName:        "work.do",
				"x-tenant":                  "acme",
			},
			Message: &quarantine.Message{ID: fmt.Sprintf("orig-%d", i), Queue: "old-" + queue, JobName: "work.do",
				MessageID: "src-1", IdempotencyKey: key, SchemaVersion: "2", Attempts: 4,
				FailureClass: quarantine.ClassExhausted, Reason: "timeout calling upstream",
				FailedAt: failed, ContentType: "application/json", Payload: []byte(`{"stale":true}`)},
		}
	}
	return out
}

// receiver is a test HTTP destination: answer decides each response.
type receiver struct {
	srv      *httptest.Server
	mu       sync.Mutex
	reqs     []*http.Request
	bodies   [][]byte
	inflight atomic.Int32
	peak     atomic.Int32
}

func newReceiver(t *testing.T, answer func(w http.ResponseWriter, r *http.Request, body []byte)) *receiver {
	t.Helper()
	rc := &receiver{}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := rc.inflight.Add(1)
		defer rc.inflight.Add(-1)
		for {
			p := rc.peak.Load()
			if n <= p || rc.peak.CompareAndSwap(p, n) {
				break
			}
		}
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.reqs = append(rc.reqs, r)
		rc.bodies = append(rc.bodies, body)
		rc.mu.Unlock()
		answer(w, r, body)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func testPublisher(t *testing.T, cfg Config) *Publisher {
	t.Helper()
	p, err := NewPublisher(cfg, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func TestPublishPostsEnvelopes(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		time.Sleep(20 * time.Millisecond) // so that requests overlap
		w.WriteHeader(http.StatusAccepted)
	})
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := testPublisher(t, Config{URL: rc.srv.URL + "/replay", TokenFile: tokenFile})
	msgs := replayMsgs("ok", "work", 40)
	for i, r := range p.Publish(context.Background(), msgs) {
		if r.Outcome != quarantine.ItemPublished || r.Err != nil {
			t.Fatalf("message %d: %s %v", i, r.Outcome, r.Err)
		}
	}
	if peak := rc.peak.Load(); peak > Parallel || peak < 2 {
		t.Fatalf("%d requests at once, want 2 to %d", peak, Parallel)
	}
	if len(rc.reqs) != len(msgs) {
		t.Fatalf("%d requests, want %d", len(rc.reqs), len(msgs))
	}
	byKey := map[string]replay.Outgoing{}
	for _, m := range msgs {
		byKey[m.IdempotencyKey] = m
	}
	for i, r := range rc.reqs {
		o, ok := byKey[r.Header.Get("Idempotency-Key")]
		if !ok {
			t.Fatalf("request %d: Idempotency-Key %q", i, r.Header.Get("Idempotency-Key"))
		}
		delete(byKey, o.IdempotencyKey)
		if r.Method != http.MethodPost || r.URL.Path != "/replay" || r.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("request %d: %s %s %s", i, r.Method, r.URL.Path, r.Header.Get("Content-Type"))
		}
		if got := r.Header.Get("Authorization"); got != "Bearer s3cret" {
			t.Fatalf("request %d: Authorization %q", i, got)
		}
		for _, k := range replayHeaders {
			if got := r.Header.Get(k); got != o.Headers[k] {
				t.Fatalf("request %d: header %s = %q, want %q", i, k, got, o.Headers[k])
			}
		}
		if r.Header.Get("x-tenant") != "" {
			t.Fatalf("request %d: a message header was sent as an HTTP header", i)
		}
		// The envelope round-trips through the collectors' decoder.
		d, problems := collect.DecodeEnvelope(rc.bodies[i], collect.Origin{Source: "http", Kind: quarantine.SourceHTTP})
		if len(problems) > 0 {
			t.Fatalf("request %d: %v\n%s", i, problems, rc.bodies[i])
		}
		if string(d.Payload) != string(o.Payload) || !maps.Equal(d.Headers, o.Headers) {
			t.Fatalf("request %d: payload %q headers %v", i, d.Payload, d.Headers)
		}
		if d.MessageID != o.MessageID || d.Queue != "work" || d.IdempotencyKey != o.IdempotencyKey || d.JobName != "work.do" ||
			d.SchemaVersion != "2" || d.Attempts != 4 || d.FailureClass != quarantine.ClassExhausted ||
			d.Reason != "timeout calling upstream" || !d.FailedAt.Equal(o.Message.FailedAt) || d.ContentType != "application/json" {
			t.Fatalf("request %d: decoded %+v", i, d)
		}
	}
}

func TestPublishAnswers(t *testing.T) {
	t.Parallel()
	date := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	longBody := "bad request: \x1b[31mred\x00" + strings.Repeat("é", 300)
	cases := []struct {
		name    string
		status  int
		header  map[string]string
		body    string
		outcome quarantine.ItemOutcome
		wait    func(time.Duration) bool
		reason  func(string) bool
	}{
		{"200", 200, nil, "", quarantine.ItemPublished, nil, nil},
		{"204", 204, nil, "", quarantine.ItemPublished, nil, nil},
		{"429 retry-after seconds", 429, map[string]string{"Retry-After": "7"}, "slow down", quarantine.ItemPending,
			func(d time.Duration) bool { return d == 7*time.Second }, nil},
		{"503 retry-after date", 503, map[string]string{"Retry-After": date}, "", quarantine.ItemPending,
			func(d time.Duration) bool { return d > 80*time.Second && d <= 90*time.Second }, nil},
		{"503 without retry-after", 503, nil, "", quarantine.ItemPending, func(d time.Duration) bool { return d == 0 }, nil},
		{"500", 500, map[string]string{"Retry-After": "5"}, "boom", quarantine.ItemPending,
			func(d time.Duration) bool { return d == 0 }, nil},
		{"400 quotes the start of the body, sanitised", 400, nil, longBody, quarantine.ItemFailed, nil, func(s string) bool {
			_, quoted, _ := strings.Cut(s, "400 Bad Request: ")
			return strings.HasPrefix(quoted, "bad request:  [31mred ééé") && len(quoted) <= reasonBytes &&
				!strings.ContainsAny(quoted, "\x1b\x00") && strings.ToValidUTF8(quoted, "") == quoted
		}},
		{"409", 409, nil, "duplicate", quarantine.ItemFailed, nil, func(s string) bool { return strings.Contains(s, "409 Conflict: duplicate") }},
		{"302 is not followed", 302, map[string]string{"Location": "/elsewhere"}, "", quarantine.ItemFailed, nil,
			func(s string) bool { return strings.Contains(s, "302") }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
				for k, v := range c.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(c.status)
				_, _ = io.WriteString(w, c.body)
			})
			p := testPublisher(t, Config{URL: rc.srv.URL})
			res := p.Publish(context.Background(), replayMsgs("answers", "work", 1))
			r := res[0]
			if r.Outcome != c.outcome {
				t.Fatalf("outcome %s (%v), want %s", r.Outcome, r.Err, c.outcome)
			}
			if c.wait != nil && !c.wait(r.RetryAfter) {
				t.Fatalf("retry after %s", r.RetryAfter)
			}
			if c.outcome != quarantine.ItemPublished && r.Err == nil {
				t.Fatal("no reason")
			}
			if c.reason != nil && !c.reason(r.Err.Error()) {
				t.Fatalf("reason %q", r.Err.Error())
			}
			if len(rc.reqs) != 1 {
				t.Fatalf("%d requests", len(rc.reqs))
			}
		})
	}
}

func TestPublishNetworkErrorIsPending(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	u := srv.URL
	srv.Close() // nothing listens there any more
	p := testPublisher(t, Config{URL: u + "/replay?token=hidden", Timeout: 2 * time.Second})
	for i, r := range p.Publish(context.Background(), replayMsgs("net", "work", 3)) {
		if r.Outcome != quarantine.ItemPending || quarantine.ErrorCode(r.Err) != quarantine.EUNAVAILABLE || r.RetryAfter != 0 {
			t.Fatalf("message %d: %s %v", i, r.Outcome, r.Err)
		}
		if strings.Contains(r.Err.Error(), "hidden") {
			t.Fatalf("the reason quotes the URL's query: %v", r.Err)
		}
	}
}

func TestPublishTimeoutAndCancel(t *testing.T) {
	t.Parallel()
	block := make(chan struct{})
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	})
	t.Cleanup(func() { close(block) })
	p := testPublisher(t, Config{URL: rc.srv.URL, Timeout: 200 * time.Millisecond})
	if r := p.Publish(context.Background(), replayMsgs("slow", "work", 1))[0]; r.Outcome != quarantine.ItemPending {
		t.Fatalf("timeout: %s %v", r.Outcome, r.Err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, r := range p.Publish(ctx, replayMsgs("cancel", "work", 20)) {
		if r.Outcome != quarantine.ItemPending {
			t.Fatalf("cancelled: %s %v", r.Outcome, r.Err)
		}
	}
}

func TestPublishWithoutMessageOrKey(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request, _ []byte) { w.WriteHeader(200) })
	p := testPublisher(t, Config{URL: rc.srv.URL, Token: "tok"})
	o := replay.Outgoing{Queue: "q", MessageID: "rb-1-m", JobName: "j", ContentType: "application/octet-stream", Payload: []byte{0, 1, 2}}
	if r := p.Publish(context.Background(), []replay.Outgoing{o})[0]; r.Outcome != quarantine.ItemPublished {
		t.Fatalf("%s %v", r.Outcome, r.Err)
	}
	req := rc.reqs[0]
	if req.Header.Get("Idempotency-Key") != "rb-1-m" || req.Header.Get("Authorization") != "Bearer tok" {
		t.Fatalf("headers %v", req.Header)
	}
	d, problems := collect.DecodeEnvelope(rc.bodies[0], collect.Origin{Source: "http", Kind: quarantine.SourceHTTP})
	// Only the failure class is unknown without the quarantined message.
	if len(problems) != 1 || problems[0].Field != "/failure/class" || string(d.Payload) != "\x00\x01\x02" ||
		d.Queue != "q" || d.JobName != "j" || d.MessageID != "rb-1-m" || d.ContentType != "application/octet-stream" {
		t.Fatalf("decoded %+v, problems %v", d, problems)
	}
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":                                0,
		"0":                               0,
		"-3":                              0,
		"12":                              12 * time.Second,
		" 3 ":                             3 * time.Second,
		"999999999":                       24 * time.Hour,
		"soon":                            0,
		"Tue, 01 Dec 2026 08:01:30 GMT":   90 * time.Second,
		"Tue, 01 Dec 2026 07:59:00 GMT":   0,
		"Tuesday, 01-Dec-26 08:00:10 GMT": 10 * time.Second,
	} {
		if got := retryAfter(v, now); got != want {
			t.Errorf("retryAfter(%q) = %s, want %s", v, got, want)
		}
	}
}

func TestConfig(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cfg   Config
		field string
	}{
		{Config{}, "url"},
		{Config{URL: "ftp://x/"}, "url"},
		{Config{URL: "http://"}, "url"},
		{Config{URL: "http://x/", Token: "a", TokenFile: "/f"}, "token_file"},
		{Config{URL: "http://x/", TokenFile: "/does/not/exist"}, "token_file"},
		{Config{URL: "http://x/", Token: "a\nb"}, "token_file"},
		{Config{URL: "http://x/", Timeout: -time.Second}, "timeout"},
	} {
		_, err := NewPublisher(c.cfg, "t", nil)
		if quarantine.ErrorCode(err) != quarantine.EINVALID || quarantine.ErrorField(err) != c.field {
			t.Errorf("%v: err %v, want EINVALID on %s", c.cfg, err, c.field)
		}
	}
	s := fmt.Sprintf("%v %#v %s", Config{URL: "http://u:pw@x/?k=v", Token: "tok"}, Config{Token: "tok"}, Config{Token: "tok"})
	if strings.Contains(s, "tok,") || strings.Contains(s, "pw") || strings.Contains(s, "k=v") || strings.Contains(s, ": tok") {
		t.Fatalf("a secret is printed: %s", s)
	}
}

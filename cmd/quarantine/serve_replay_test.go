package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
)

// receiver is an HTTP replay destination that answers 429 with
// Retry-After to the first request of each idempotency key, then 202.
type receiver struct {
	mu      sync.Mutex
	refused map[string]time.Time // key -> when it was answered 429
	got     []receivedReplay
}

type receivedReplay struct {
	at       time.Time
	key      string
	auth     string
	replayID string
	body     []byte
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	key := r.Header.Get("Idempotency-Key")
	if _, ok := rc.refused[key]; !ok {
		rc.refused[key] = time.Now()
		w.Header().Set("Retry-After", "1")
		http.Error(w, "slow down", http.StatusTooManyRequests)
		return
	}
	rc.got = append(rc.got, receivedReplay{at: time.Now(), key: key,
		auth: r.Header.Get("Authorization"), replayID: r.Header.Get("x-quarantine-replay-id"), body: body})
	w.WriteHeader(http.StatusAccepted)
}

func (rc *receiver) received() []receivedReplay {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]receivedReplay(nil), rc.got...)
}

// Messages pushed over HTTP ingest replay through a `destinations:` entry
// of kind http: the receiver gets the canonical envelope with the
// idempotency key, the token from token_file, and a 429 with Retry-After
// slows the batch down instead of failing its items.
func TestServe_ReplayToHTTPDestination(t *testing.T) {
	t.Parallel()
	rc := &receiver{refused: map[string]time.Time{}}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("s3cret-replay\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "quarantine.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`
database: sqlite:%s
destinations:
  - queues: ["work.*"]
    kind: http
    url: %s/replay
    token_file: %s
replay: {canary: 0, poll: 50ms}
`, filepath.Join(dir, "q.db"), srv.URL, filepath.Join(dir, "token"))), 0o600); err != nil {
		t.Fatal(err)
	}
	m, stderr, _ := serve(t, "--config", cfg)
	urls := reLoginURL.FindStringSubmatch(stderr.String())
	if urls == nil {
		t.Fatalf("no admin token printed:\n%s", stderr)
	}
	admin := client{t: t, base: "http://" + m.Addr(), token: urls[1]}
	var envs []string
	for i := range 3 {
		envs = append(envs, fmt.Sprintf(`{"envelope":"quarantine.failure/v1","job":{"id":"j%d","name":"build-report","queue":"work.reports",
			"idempotency_key":"report-%d","payload":{"n":%d}},"failure":{"class":"exhausted","reason":"timeout"}}`, i, i, i))
	}
	var ing struct{ Items []struct{ ID string } }
	admin.json("POST", "/api/v1/ingest", []byte("["+strings.Join(envs, ",")+"]"), 200, &ing)
	if len(ing.Items) != 3 {
		t.Fatalf("ingested %d", len(ing.Items))
	}
	var created struct {
		Replay struct{ ID string } `json:"replay"`
	}
	admin.json("POST", "/api/v1/replays", []byte(`{"filter":{"queue":["work.reports"]},"expect_count":3,"rate":100,"reason":"fixed"}`), 201, &created)
	var b struct {
		State  string         `json:"state"`
		Counts map[string]int `json:"counts"`
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		admin.json("GET", "/api/v1/replays/"+created.Replay.ID, nil, 200, &b)
		if b.State == "completed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replay is %s %v", b.State, b.Counts)
		}
	}
	if b.Counts["published"] != 3 || b.Counts["failed"] != 0 {
		t.Fatalf("counts %v: a 429 must slow the batch down, not fail items", b.Counts)
	}
	got := rc.received()
	if len(got) != 3 {
		t.Fatalf("the receiver got %d replays, want 3", len(got))
	}
	keys := map[string]bool{}
	for _, r := range got {
		rc.mu.Lock()
		refused := rc.refused[r.key]
		rc.mu.Unlock()
		if d := r.at.Sub(refused); d < time.Second-50*time.Millisecond {
			t.Errorf("%s came again %s after its 429 asked for 1s", r.key, d)
		}
		if r.auth != "Bearer s3cret-replay" || r.replayID != created.Replay.ID {
			t.Errorf("headers: Authorization %q, replay id %q", r.auth, r.replayID)
		}
		msg, problems := collect.DecodeEnvelope(r.body, collect.Origin{Source: "test", Kind: quarantine.SourceHTTP})
		if len(problems) > 0 {
			t.Errorf("the body is not a canonical envelope: %v\n%s", problems, r.body)
		}
		if msg.IdempotencyKey != r.key || msg.Queue != "work.reports" || msg.JobName != "build-report" {
			t.Errorf("envelope key %q (header %q), queue %q, job %q", msg.IdempotencyKey, r.key, msg.Queue, msg.JobName)
		}
		var p struct{ N int }
		if err := json.Unmarshal(msg.Payload, &p); err != nil {
			t.Errorf("payload %s: %v", msg.Payload, err)
		}
		keys[r.key] = true
	}
	if len(keys) != 3 {
		t.Errorf("keys %v", keys)
	}
	var items struct {
		Items []struct {
			Destination string `json:"destination"`
		} `json:"items"`
	}
	admin.json("GET", "/api/v1/replays/"+created.Replay.ID+"/items", nil, 200, &items)
	for _, it := range items.Items {
		if it.Destination != "http:destinations[0]/work.reports" {
			t.Errorf("item destination %q", it.Destination)
		}
	}
}

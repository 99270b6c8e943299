package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"
)

// hookReceiver is a webhook alarm receiver on 127.0.0.1 that records the
// notifications it gets.
type hookReceiver struct {
	mu  sync.Mutex
	got []map[string]any
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	h.got = append(h.got, v)
	h.mu.Unlock()
}

// kinds returns the kinds received so far.
func (h *hookReceiver) kinds() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, v := range h.got {
		out = append(out, fmt.Sprint(v["kind"]))
	}
	return out
}

// waitKinds waits until the receiver got want (and fails on anything else).
func (h *hookReceiver) waitKinds(t *testing.T, want ...string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got := h.kinds()
		if fmt.Sprint(got) == fmt.Sprint(want) {
			return
		}
		if len(got) > len(want) || time.Now().After(deadline) {
			t.Fatalf("the receiver got %v, want %v", got, want)
		}
	}
}

// metricValue returns the value of the sample of /metrics matching re
// (a regexp of the whole line up to the value), or -1 when there is none.
func metricValue(t *testing.T, c client, re string) float64 {
	t.Helper()
	_, _, body := c.do("GET", "/metrics", nil)
	m := regexp.MustCompile(`(?m)^` + re + ` (\S+)$`).FindSubmatch(body)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatalf("metric %s: %v", re, err)
	}
	return v
}

// The real wiring: an old dead letter makes the configured alarm fire
// once at the webhook, /metrics shows the messages, the oldest age and
// the firing alarm, and discarding the message resolves it once.
func TestServe_AlarmsAndMetrics(t *testing.T) {
	t.Parallel()
	hook := &hookReceiver{}
	srv := httptest.NewServer(hook)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "quarantine.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`
database: sqlite:%s
owners:
  - team: payments
    queues: ["orders"]
alarms:
  - name: orders-age
    queues: ["orders"]
    max_age: 15m
    interval: 20ms
    receivers: [{webhook: %s/hook}]
`, filepath.Join(dir, "q.db"), srv.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	m, stderr, stop := serve(t, "--config", cfg)
	urls := reLoginURL.FindStringSubmatch(stderr.String())
	if urls == nil {
		t.Fatalf("no admin token printed:\n%s", stderr)
	}
	admin := client{t: t, base: "http://" + m.Addr(), token: urls[1]}
	failed := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	var ing struct{ Items []struct{ ID string } }
	admin.json("POST", "/api/v1/ingest", []byte(`[{"envelope":"quarantine.failure/v1","job":{"id":"j1","name":"charge","queue":"orders",
		"idempotency_key":"order-1","payload":{"n":1}},"failure":{"class":"exhausted","reason":"timeout","failed_at":"`+failed+`"}},
		{"envelope":"quarantine.failure/v1","job":{"id":"j2","name":"report","queue":"reports",
		"idempotency_key":"r-1","payload":{"n":2}},"failure":{"class":"exhausted","reason":"timeout"}}]`), 200, &ing)
	if len(ing.Items) != 2 {
		t.Fatalf("ingested %+v", ing)
	}
	hook.waitKinds(t, "firing")

	if v := metricValue(t, admin, `quarantine_messages\{owner="payments",queue="orders",status="quarantined"\}`); v != 1 {
		t.Errorf("quarantine_messages of orders = %v, want 1", v)
	}
	if v := metricValue(t, admin, `quarantine_messages\{owner="",queue="reports",status="discarded"\}`); v != 0 {
		t.Errorf("quarantine_messages of reports, discarded = %v, want 0 (every status present)", v)
	}
	if v := metricValue(t, admin, `quarantine_oldest_message_age_seconds\{owner="payments",queue="orders"\}`); v < 3600 || v > 3700 {
		t.Errorf("oldest age of orders = %v, want about 3600", v)
	}
	if v := metricValue(t, admin, `quarantine_alarm_firing\{alarm="orders-age",owner="payments",queue="orders"\}`); v != 1 {
		t.Errorf("quarantine_alarm_firing = %v, want 1", v)
	}
	if v := metricValue(t, admin, `quarantine_alarm_firing\{alarm="orders-age",owner="",queue="reports"\}`); v != -1 {
		t.Errorf("a young queue has an alarm state: %v", v)
	}

	admin.json("POST", "/api/v1/messages/"+ing.Items[0].ID+"/discard", []byte(`{"reason":"obsolete"}`), 200, nil)
	hook.waitKinds(t, "firing", "resolved")
	if v := metricValue(t, admin, `quarantine_alarm_firing\{alarm="orders-age",owner="payments",queue="orders"\}`); v != 0 {
		t.Errorf("quarantine_alarm_firing after the discard = %v, want 0", v)
	}
	if v := metricValue(t, admin, `quarantine_oldest_message_age_seconds\{owner="payments",queue="orders"\}`); v != 0 {
		t.Errorf("oldest age of an empty queue = %v, want 0", v)
	}
	stop()

	// A restart on the same database pages nobody again.
	m2, _, _ := serve(t, "--config", cfg)
	c2 := client{t: t, base: "http://" + m2.Addr(), token: urls[1]}
	// Once the restarted service has evaluated the alarms (the first
	// evaluation runs at start), their state is final for this database.
	for deadline := time.Now().Add(20 * time.Second); m2.alarms.evaluator.Evaluations() < 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the restarted service did not evaluate the alarms")
		}
	}
	if metricValue(t, c2, `quarantine_alarm_firing\{alarm="orders-age",owner="payments",queue="orders"\}`) != 0 {
		t.Fatal("the alarm fires again after a restart")
	}
	hook.waitKinds(t, "firing", "resolved")
}

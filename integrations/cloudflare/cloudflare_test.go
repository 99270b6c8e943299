// Package cloudflare_test runs the Worker of src/index.js in Cloudflare's
// own runtime (workerd, through miniflare: test/harness.mjs) against the
// built quarantine binary on SQLite.
package cloudflare_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
	"github.com/quarantine-dev/quarantine/internal/testbin"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Remove()
	os.Exit(code)
}

// maxRetries is the work queue's max_retries: a poison job is delivered
// maxRetries+1 times, then dead-lettered.
const maxRetries = 2

var (
	npmOnce sync.Once
	npmErr  error
)

// requireNode skips without node and npm (fails under CI=true) and
// installs the npm dependencies with `npm ci` once, unless they are
// already installed from the current package-lock.json.
func requireNode(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is needed under CI=true (apt-get install nodejs npm)", tool)
			}
			t.Skipf("%s is not installed", tool)
		}
	}
	npmOnce.Do(func() {
		lock, err := os.Stat("package-lock.json")
		if err != nil {
			npmErr = err
			return
		}
		if inst, err := os.Stat(filepath.Join("node_modules", ".package-lock.json")); err == nil && !inst.ModTime().Before(lock.ModTime()) {
			if _, err := os.Stat(filepath.Join("node_modules", "miniflare", "package.json")); err == nil {
				return
			}
		}
		out, err := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--loglevel=error").CombinedOutput()
		if err != nil {
			npmErr = fmt.Errorf("npm ci: %v\n%s", err, out)
		}
	})
	if npmErr != nil {
		t.Fatal(npmErr)
	}
}

// harness is a running test/harness.mjs.
type harness struct {
	Control string `json:"control"`
	Worker  string `json:"worker"`
	cmd     *exec.Cmd
	log     *logBuffer
}

type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func startHarness(t *testing.T, upstream, ingestToken, replayToken string) *harness {
	t.Helper()
	cmd := exec.Command("node", "test/harness.mjs")
	cmd.Env = append(os.Environ(), "UPSTREAM="+upstream, "QUARANTINE_TOKEN="+ingestToken, "REPLAY_TOKEN="+replayToken,
		fmt.Sprintf("MAX_RETRIES=%d", maxRetries))
	stdin, err := cmd.StdinPipe() // closed at the end: the harness stops
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{cmd: cmd, log: &logBuffer{}}
	cmd.Stderr = h.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		_ = stdin.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	ready := make(chan string, 1)
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			if !sent && strings.HasPrefix(line, "HARNESS ") {
				ready <- strings.TrimPrefix(line, "HARNESS ")
				sent = true
				continue
			}
			_, _ = h.log.Write([]byte(line + "\n"))
		}
		_ = cmd.Wait()
		if !sent {
			close(ready)
		}
	}()
	select {
	case line, ok := <-ready:
		if !ok {
			t.Fatalf("the harness ended before it was ready:\n%s", h.log)
		}
		if err := json.Unmarshal([]byte(line), h); err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the harness did not start:\n%s", h.log)
	}
	return h
}

// record is one delivery the work queue's consumer got.
type record struct {
	ID       string          `json:"id"`
	Attempts int             `json:"attempts"`
	Queue    string          `json:"queue"`
	Body     json.RawMessage `json:"body"`
}

// ingest is one request of the Worker to the quarantine's ingest.
type ingest struct {
	Body    string `json:"body"`
	Outcome string `json:"outcome"`
}

type state struct {
	Records []record `json:"records"`
	Ingests []ingest `json:"ingests"`
}

func (h *harness) post(t *testing.T, path string, v any) {
	t.Helper()
	b, _ := json.Marshal(v)
	resp, err := http.Post(h.Control+path, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		raw, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST %s: %d %s", path, resp.StatusCode, raw)
	}
}

func (h *harness) state(t *testing.T) state {
	t.Helper()
	resp, err := http.Get(h.Control + "/state")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s state
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// waitState waits (at most within) until cond holds of the harness state.
func (h *harness) waitState(t *testing.T, what string, within time.Duration, cond func(state) bool) state {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(50 * time.Millisecond) {
		s := h.state(t)
		if cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s\nharness log:\n%s", what, within, h.log)
		}
	}
}

// jobIDs returns the job ids of an ingest body (an array of envelopes).
func jobIDs(t *testing.T, body string) []string {
	t.Helper()
	var envs []struct {
		Job struct {
			ID string `json:"id"`
		} `json:"job"`
	}
	if err := json.Unmarshal([]byte(body), &envs); err != nil {
		t.Fatalf("ingest body %q: %v", body, err)
	}
	ids := make([]string, len(envs))
	for i, e := range envs {
		ids[i] = e.Job.ID
	}
	return ids
}

// outcomes maps each job id to the outcomes of the ingests that carried it.
func outcomes(t *testing.T, s state) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, in := range s.Ingests {
		for _, id := range jobIDs(t, in.Body) {
			out[id] = append(out[id], in.Outcome)
		}
	}
	return out
}

// poisonIDs returns the transport ids of the poison jobs whose body has
// tag (the "batch" member, or the text) from the consumer's records.
func poisonIDs(s state, tags ...string) map[string]string {
	ids := map[string]string{} // id -> body
	for _, r := range s.Records {
		var obj struct {
			Poison bool   `json:"poison"`
			Batch  string `json:"batch"`
		}
		var text string
		for _, tag := range tags {
			if (json.Unmarshal(r.Body, &obj) == nil && obj.Poison && obj.Batch == tag) ||
				(json.Unmarshal(r.Body, &text) == nil && strings.HasPrefix(text, "poison") && strings.HasSuffix(text, tag)) {
				ids[r.ID] = string(r.Body)
			}
		}
	}
	return ids
}

// stored is what the API says of a message.
type stored struct {
	ID             string                  `json:"id"`
	Source         string                  `json:"source"`
	SourceKind     string                  `json:"source_kind"`
	Queue          string                  `json:"queue"`
	JobName        string                  `json:"job_name"`
	MessageID      string                  `json:"message_id"`
	IdempotencyKey string                  `json:"idempotency_key"`
	Attempts       int                     `json:"attempts"`
	FailureClass   quarantine.FailureClass `json:"failure_class"`
	Flags          []string                `json:"flags"`
	PayloadSHA256  string                  `json:"payload_sha256"`
	Headers        map[string]string       `json:"headers"`
}

func listWork(t *testing.T, api testbin.API) []stored {
	t.Helper()
	var page struct {
		Items []stored `json:"items"`
	}
	api.MustDo(t, 200, "GET", "/api/v1/messages?limit=1000&queue=work", nil, &page)
	return page.Items
}

// checkStoredOnce asserts that the quarantine holds exactly the poison
// jobs of want (id -> body), each once, with the queue, attempts and key.
func checkStoredOnce(t *testing.T, api testbin.API, want map[string]string) {
	t.Helper()
	got := listWork(t, api)
	seen := map[string]int{}
	for _, m := range got {
		seen[m.MessageID]++
		body, ok := want[m.MessageID]
		if !ok {
			t.Errorf("stored %s (%s), which is not a poison job", m.MessageID, m.ID)
			continue
		}
		var obj struct{ Key string }
		_ = json.Unmarshal([]byte(body), &obj)
		if m.Queue != "work" || m.JobName != "work-job" || m.Attempts != maxRetries+1 || m.IdempotencyKey != obj.Key ||
			m.SourceKind != string(quarantine.SourceCloudflare) || m.Source != "cf-test" || m.FailureClass != quarantine.ClassExhausted ||
			m.Headers["x-cloudflare-dead-letter-queue"] != "work-dlq" {
			t.Errorf("stored %+v for body %s", m, body)
		}
	}
	for id := range want {
		if seen[id] != 1 {
			t.Errorf("job %s is stored %d times, want once", id, seen[id])
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d messages stored, want %d", len(got), len(want))
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func createToken(t *testing.T, bin, db, name, role string) string {
	t.Helper()
	cmd := exec.Command(bin, "token", "create", "--database", db, "--name", name, "--role", role)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("token create: %v\n%s", err, stderr.String())
	}
	return strings.TrimSpace(stdout.String())
}

func poisonBodies(batch string, from, to int) []any {
	var bodies []any
	for i := from; i <= to; i++ {
		bodies = append(bodies, map[string]any{"n": i, "key": fmt.Sprintf("key-%d", i), "poison": true, "batch": batch})
	}
	return bodies
}

func TestWorkerInWorkerd(t *testing.T) {
	requireNode(t)
	start := time.Now()
	bin := testbin.Path(t)
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "q.db")
	admin := createToken(t, bin, db, "test-admin", "admin")
	ingestToken := createToken(t, bin, db, "cf-worker", "operator")
	const replayToken = "cf-replay-s3cret"
	port := freePort(t)
	h := startHarness(t, fmt.Sprintf("http://127.0.0.1:%d", port), ingestToken, replayToken)
	cfg := filepath.Join(dir, "quarantine.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`listen: 127.0.0.1:%d
database: %s
destinations:
  - queues: ["work"]
    kind: cloudflare
    url: %s/replay
    token: %s
replay: {canary: 0, poll: 50ms, incident_window: 0s}
`, port, db, h.Worker, replayToken)), 0o600); err != nil {
		t.Fatal(err)
	}
	q := testbin.Serve(t, bin, cfg)
	api := q.API(admin)
	want := map[string]string{}

	// 1. Poison jobs exhaust their retries and are stored once, even when
	// the quarantine's first answer is lost (it stored them; the Worker
	// retries; the same envelope bytes are one message).
	h.post(t, "/lose", map[string]int{"n": 1})
	bodies := append(poisonBodies("a", 1, 4), map[string]any{"n": 100, "key": "ok-1"}, map[string]any{"n": 101, "key": "ok-2"}, "poison text a")
	h.post(t, "/enqueue", map[string]any{"bodies": bodies})
	s := h.waitState(t, "batch a stored and acked", 60*time.Second, func(s state) bool {
		ids := poisonIDs(s, "a")
		if len(ids) != 5 {
			return false
		}
		oc := outcomes(t, s)
		for id := range ids {
			if !contains(oc[id], "ok") {
				return false
			}
		}
		return true
	})
	for id, b := range poisonIDs(s, "a") {
		want[id] = b
	}
	if oc := outcomes(t, s); !anyOutcome(oc, "lost") {
		t.Errorf("no ingest answer was lost: %v", oc)
	}
	deliveries := map[string][]int{}
	for _, r := range s.Records {
		deliveries[r.ID] = append(deliveries[r.ID], r.Attempts)
	}
	for id := range want {
		if fmt.Sprint(deliveries[id]) != fmt.Sprint([]int{1, 2, 3}) {
			t.Errorf("poison job %s was delivered with attempts %v, want [1 2 3]", id, deliveries[id])
		}
	}
	checkStoredOnce(t, api, want)

	// 2. The quarantine dies while dead letters arrive: the Worker's
	// ingests fail, it retries, and once the quarantine is back (same
	// database, same port) every message is stored, once.
	q.Kill()
	h.post(t, "/enqueue", map[string]any{"bodies": append(poisonBodies("b", 5, 7), "poison text b")})
	s = h.waitState(t, "batch b refused while the quarantine is down", 60*time.Second, func(s state) bool {
		ids := poisonIDs(s, "b")
		oc := outcomes(t, s)
		n := 0
		for id := range ids {
			if contains(oc[id], "down") {
				n++
			}
		}
		return len(ids) == 4 && n == 4
	})
	if t.Failed() {
		return
	}
	q = testbin.Serve(t, bin, cfg)
	s = h.waitState(t, "batch b stored after the restart", 60*time.Second, func(s state) bool {
		oc := outcomes(t, s)
		for id := range poisonIDs(s, "b") {
			if !contains(oc[id], "ok") {
				return false
			}
		}
		return true
	})
	for id, b := range poisonIDs(s, "b") {
		want[id] = b
	}
	checkStoredOnce(t, api, want)

	// What the Worker really POSTed decodes without problems.
	for _, in := range s.Ingests {
		var elems []json.RawMessage
		if err := json.Unmarshal([]byte(in.Body), &elems); err != nil {
			t.Fatalf("ingest body: %v", err)
		}
		for _, e := range elems {
			m, problems := collect.DecodeEnvelope(e, collect.Origin{Source: "cf-test", Kind: quarantine.SourceCloudflare})
			if len(problems) > 0 || m.FailureClass != quarantine.ClassExhausted || m.Queue != "work" || m.Attempts != maxRetries+1 {
				t.Errorf("envelope %s: problems %v, message %+v", e, problems, m)
			}
			if body, ok := want[m.MessageID]; !ok {
				t.Errorf("envelope of %s, not a poison job", m.MessageID)
			} else if m.ContentType == collect.ContentTypeJSON && string(m.Payload) != body {
				t.Errorf("payload %s, the consumer got %s", m.Payload, body)
			} else if m.ContentType != collect.ContentTypeJSON && `"`+string(m.Payload)+`"` != body {
				t.Errorf("text payload %q (%s), the consumer got %s", m.Payload, m.ContentType, body)
			}
		}
	}

	// 3. An edited message replayed through the Worker reaches the work
	// queue's consumer with the edited payload and the original key, which
	// the Worker writes back into /key.
	var target stored
	for _, m := range listWork(t, api) {
		if m.IdempotencyKey == "key-1" {
			target = m
		}
	}
	if target.ID == "" {
		t.Fatal("no stored message has key key-1")
	}
	if st, raw := api.DoHeaders(t, "PUT", "/api/v1/messages/"+target.ID+"/payload", map[string]string{"If-Match": `"` + target.PayloadSHA256 + `"`},
		map[string]any{"payload": map[string]any{"n": 1, "edited": true}, "reason": "drop the poison flag"}, nil); st != 200 {
		t.Fatalf("the edit: %d %s", st, raw)
	}
	before := len(s.Records)
	b := api.CreateReplay(t, map[string]any{"ids": []string{target.ID}, "reason": "fixed", "rate": 100})
	b = api.WaitReplay(t, b.ID, 30*time.Second, "completed")
	if b.Counts["published"] != 1 {
		t.Fatalf("replay counts %v", b.Counts)
	}
	for _, it := range api.Items(t, b.ID, "") {
		if it.IdempotencyKey != "key-1" || !strings.Contains(it.Destination, "destinations[0]") {
			t.Errorf("item %+v", it)
		}
	}
	s = h.waitState(t, "the replay reached the consumer", 30*time.Second, func(s state) bool { return len(s.Records) > before })
	r := s.Records[before]
	var got struct {
		N      int    `json:"n"`
		Key    string `json:"key"`
		Edited bool   `json:"edited"`
		Poison bool   `json:"poison"`
	}
	if err := json.Unmarshal(r.Body, &got); err != nil || r.Queue != "work" || r.Attempts != 1 || got.Key != "key-1" || !got.Edited || got.Poison || got.N != 1 {
		t.Errorf("the consumer got %+v (%s) on %s attempt %d, want the edited payload with key key-1", got, r.Body, r.Queue, r.Attempts)
	}
	if _, ok := want[r.ID]; ok {
		t.Errorf("the replayed job kept its transport id %s", r.ID)
	}

	// /replay refuses a bad token (401) and an unknown queue (404); the
	// engine fails such items instead of retrying them.
	env, _ := quarantine.MarshalEnvelope(&quarantine.Message{MessageID: "x", JobName: "j", Queue: "nowhere", IdempotencyKey: "k"}, []byte(`{"a":1}`), nil)
	for _, c := range []struct {
		token string
		want  int
	}{{"wrong", 401}, {replayToken, 404}} {
		req, _ := http.NewRequest("POST", h.Worker+"/replay", bytes.NewReader(env))
		req.Header.Set("Authorization", "Bearer "+c.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("POST /replay with token %q: %d, want %d", c.token, resp.StatusCode, c.want)
		}
	}
	api.AuditVerifies(t)
	t.Logf("the whole loop took %s", time.Since(start).Round(time.Millisecond))
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func anyOutcome(oc map[string][]string, s string) bool {
	for _, v := range oc {
		if contains(v, s) {
			return true
		}
	}
	return false
}

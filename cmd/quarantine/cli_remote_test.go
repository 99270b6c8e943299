package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine/internal/pgtest"
)

// destHook is the replay destination of the CLI tests: /ok takes every
// message (202), /bad refuses every one (400: the items fail); /alarm
// takes the alarm's notifications.
type destHook struct {
	mu   sync.Mutex
	keys []string // the idempotency keys /ok took
}

func (h *destHook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	if r.URL.Path == "/bad" {
		http.Error(w, "no such route", http.StatusBadRequest)
		return
	}
	if r.URL.Path == "/ok" {
		h.mu.Lock()
		h.keys = append(h.keys, r.Header.Get("Idempotency-Key"))
		h.mu.Unlock()
	}
	w.WriteHeader(http.StatusAccepted)
}

func (h *destHook) took() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := slices.Clone(h.keys)
	slices.Sort(k)
	return k
}

// cliEnv runs client commands against one server, as a shell with
// QUARANTINE_SERVER and QUARANTINE_TOKEN set would.
type cliEnv struct {
	t   *testing.T
	env map[string]string
}

// run runs one command line with stdin and returns the exit status and
// the output; configure, when given, adjusts the Main first.
func (e cliEnv) run(configure func(*Main), stdin string, args ...string) (code int, stdout, stderr string) {
	e.t.Helper()
	m, out, errw := newTestMain()
	m.Getenv = envOf(e.env)
	m.Stdin = strings.NewReader(stdin)
	if configure != nil {
		configure(m)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code = Execute(ctx, m, args)
	return code, out.String(), errw.String()
}

// ok runs a command that must exit 0 and returns its stdout.
func (e cliEnv) ok(args ...string) string {
	e.t.Helper()
	code, out, errOut := e.run(nil, "", args...)
	if code != 0 {
		e.t.Fatalf("quarantine %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// json runs a command with --output json that must exit 0 and decodes
// its stdout into v.
func (e cliEnv) json(v any, args ...string) {
	e.t.Helper()
	out := e.ok(append(args, "--output", "json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		e.t.Fatalf("quarantine %s --output json: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// fails runs a command that must exit with code and say want on
// stderr, and returns its stdout.
func (e cliEnv) fails(code int, want string, args ...string) string {
	e.t.Helper()
	got, out, errOut := e.run(nil, "", args...)
	if got != code || !strings.Contains(errOut, want) {
		e.t.Fatalf("quarantine %s: exit %d (want %d), stderr %q (want %q); stdout:\n%s", strings.Join(args, " "), got, code, errOut, want, out)
	}
	return out
}

// page is the part of a list answer the tests read.
type page struct {
	Items []struct {
		ID     string `json:"id"`
		Queue  string `json:"queue"`
		Status string `json:"status"`
		Count  int    `json:"count"`
		State  string `json:"state"`
		Alarm  string `json:"alarm"`
	} `json:"items"`
	NextCursor *string `json:"next_cursor"`
}

// batch is the part of a replay batch the tests read.
type batch struct {
	ID     string         `json:"id"`
	State  string         `json:"state"`
	Total  int            `json:"total"`
	Counts map[string]int `json:"counts"`
}

func TestCLI_SQLite(t *testing.T) {
	t.Parallel()
	testCLI(t, "sqlite:"+filepath.Join(t.TempDir(), "q.db"))
}

func TestCLI_Postgres(t *testing.T) {
	t.Parallel()
	testCLI(t, pgtest.URL(t), "--migrate")
}

// loginToken is the admin token of the login URL a first start prints.
func loginToken(t *testing.T, stderr string) string {
	t.Helper()
	if urls := reLoginURL.FindStringSubmatch(stderr); urls != nil {
		return urls[1]
	}
	t.Fatalf("no admin token printed:\n%s", stderr)
	return ""
}

var reDraftID = regexp.MustCompile(`dry run: replay ([0-9A-Z]{26})`)

// testCLI drives every client command against a real serve on db, with
// messages ingested over HTTP and replays to a real HTTP destination.
func testCLI(t *testing.T, db string, serveArgs ...string) {
	hook := &destHook{}
	dest := httptest.NewServer(hook)
	t.Cleanup(dest.Close)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "quarantine.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`
database: %s
owners:
  - team: reporting
    queues: ["work.*"]
destinations:
  - queues: ["work.*"]
    kind: http
    url: %s/ok
  - queues: ["bad.*"]
    kind: http
    url: %s/bad
replay: {canary: 0, poll: 50ms}
alarms:
  - name: old-orders
    queues: ["old.*"]
    max_age: 15m
    interval: 20ms
    receivers: [{webhook: %s/alarm}]
`, db, dest.URL, dest.URL, dest.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	m, stderr, _ := serve(t, append([]string{"--config", cfg}, serveArgs...)...)
	admin := client{t: t, base: "http://" + m.Addr(), token: loginToken(t, stderr.String())}

	// Messages arrive over HTTP ingest.
	var envs []string
	add := func(queue, key string, n int, failedAt time.Time) {
		keyField := ""
		if key != "" {
			keyField = fmt.Sprintf(`"idempotency_key":%q,`, key)
		}
		envs = append(envs, fmt.Sprintf(`{"envelope":"quarantine.failure/v1","job":{"id":"%s-%d","name":"build-report","queue":%q,%s
			"payload":{"n":%d}},"failure":{"class":"exhausted","reason":"timeout after %ds","failed_at":%q}}`,
			queue, n, queue, keyField, n, n, failedAt.UTC().Format(time.RFC3339)))
	}
	now := time.Now()
	for i := range 3 {
		add("work.reports", fmt.Sprintf("r-%d", i), i, now)
	}
	add("work.reports", "", 3, now) // no key: the replay skips it
	for i := range 4 {
		add("work.slow", fmt.Sprintf("s-%d", i), 10+i, now)
	}
	add("bad.orders", "b-0", 20, now)
	add("bad.orders", "b-1", 21, now)
	add("misc", "m-0", 30, now)
	add("misc", "m-1", 31, now)
	add("old.orders", "o-0", 40, now.Add(-time.Hour))
	var ing struct{ Stored int }
	admin.json("POST", "/api/v1/ingest", []byte("["+strings.Join(envs, ",")+"]"), 200, &ing)
	if ing.Stored != len(envs) {
		t.Fatalf("stored %d of %d", ing.Stored, len(envs))
	}

	cli := cliEnv{t: t, env: map[string]string{EnvServer: admin.base, EnvToken: admin.token}}
	testCLIMessages(t, cli, db)
	testCLIReplays(t, cli, hook)
	testCLIAlarmsAndAudit(t, cli)
}

// testCLIMessages: list (filters, pages, JSON), show, edit, discard,
// groups, and errors as the server's problems.
func testCLIMessages(t *testing.T, cli cliEnv, db string) {
	var all, reports page
	cli.json(&all, "messages", "list")
	if len(all.Items) != 13 {
		t.Fatalf("messages list: %d messages, want 13", len(all.Items))
	}
	cli.json(&reports, "messages", "list", "--queue", "work.reports", "--status", "quarantined,replaying")
	if len(reports.Items) != 4 {
		t.Fatalf("--queue work.reports: %d messages, want 4", len(reports.Items))
	}
	// "timeout after 1" is in the reasons of n = 1 and 10 to 13, all of
	// queues the team reporting owns (text search lags a little).
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var found page
		cli.json(&found, "messages", "list", "--owner", "reporting", "--q", "timeout after 1")
		if len(found.Items) == 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("--owner reporting --q: %d messages, want 5", len(found.Items))
		}
	}

	// The table, one page of two, then the next page by its cursor.
	code, out, errOut := cli.run(nil, "", "messages", "list", "--queue", "work.reports", "--limit", "2")
	cursor := regexp.MustCompile(`more: add --cursor (\S+)`).FindStringSubmatch(errOut)
	if code != 0 || countOf(out, "\n") != 3 || !strings.HasPrefix(out, "ID ") || cursor == nil {
		t.Fatalf("messages list --limit 2: exit %d\n%s\nstderr %q", code, out, errOut)
	}
	code, out2, errOut := cli.run(nil, "", "messages", "list", "--queue", "work.reports", "--limit", "2", "--cursor", cursor[1])
	if code != 0 || countOf(out2, "\n") != 3 || strings.Contains(errOut, "more:") {
		t.Fatalf("the second page: exit %d\n%s\nstderr %q", code, out2, errOut)
	}
	for _, it := range reports.Items {
		if countOf(out+out2, it.ID) != 1 {
			t.Fatalf("%s is not on exactly one page:\n%s%s", it.ID, out, out2)
		}
	}

	// Show; edit from stdin, stored as written; a stale --if-match is
	// refused with the server's problem.
	id := reports.Items[0].ID
	if out := cli.ok("messages", "show", id); !strings.Contains(out, "work.reports") || !strings.Contains(out, `"n":`) {
		t.Fatalf("messages show:\n%s", out)
	}
	before := cli.ok("messages", "show", id, "--payload")
	var cur struct {
		PayloadSHA256 string `json:"payload_sha256"`
	}
	cli.json(&cur, "messages", "show", id)
	newPayload := "{\n  \"n\": 99,\n  \"fixed\": true\n}"
	code, out, errOut = cli.run(nil, newPayload+"\n", "messages", "edit", id, "--payload-file", "-", "--reason", "fix n", "--if-match", cur.PayloadSHA256)
	if code != 0 || !strings.Contains(out, "payload version 2") {
		t.Fatalf("messages edit: exit %d\n%s\n%s", code, out, errOut)
	}
	if got := cli.ok("messages", "show", id, "--payload"); got != newPayload {
		t.Fatalf("the stored payload is %q, want the bytes given %q (before: %q)", got, newPayload, before)
	}
	file := filepath.Join(t.TempDir(), "p.json")
	if err := os.WriteFile(file, []byte(`{"n":100}`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = cli.run(nil, "", "messages", "edit", id, "--payload-file", file, "--reason", "again", "--if-match", cur.PayloadSHA256)
	if code != 1 || !strings.HasPrefix(errOut, "quarantine: Precondition Failed: ") || !strings.Contains(errOut, "(field If-Match)") {
		t.Fatalf("a stale --if-match: exit %d, stderr %q", code, errOut)
	}

	// Discard two at once, then one of them again: a conflict.
	var misc page
	cli.json(&misc, "messages", "list", "--queue", "misc")
	if len(misc.Items) != 2 {
		t.Fatalf("misc: %d messages", len(misc.Items))
	}
	out = cli.ok("messages", "discard", misc.Items[0].ID, misc.Items[1].ID, "--reason", "obsolete")
	if !strings.Contains(out, "2 discarded, 0 skipped") {
		t.Fatalf("messages discard:\n%s", out)
	}
	cli.fails(1, "Conflict", "messages", "discard", misc.Items[0].ID, "--reason", "again")
	cli.json(&misc, "messages", "list", "--queue", "misc", "--status", "discarded")
	if len(misc.Items) != 2 {
		t.Fatalf("discarded misc: %d messages, want 2", len(misc.Items))
	}

	// Groups of the filter, largest first, counting every message.
	var groups page
	cli.json(&groups, "groups", "list", "--queue", "work.reports", "--queue", "work.slow")
	sum := 0
	for _, g := range groups.Items {
		sum += g.Count
	}
	if sum != 8 {
		t.Fatalf("groups list: %d messages in %d groups, want 8", sum, len(groups.Items))
	}
	if out := cli.ok("groups", "list"); !strings.HasPrefix(out, "COUNT") || !strings.Contains(out, "build-report") {
		t.Fatalf("groups list:\n%s", out)
	}

	// Errors: the server's problem with its field and exit 1; the command
	// line's with exit 2; a viewer may not discard.
	cli.fails(1, `Bad Request: unknown status "bogus" (field status)`, "messages", "list", "--status", "bogus")
	cli.fails(1, "Not Found", "messages", "show", "01JDQ6X7Y8Z9A0B1C2D3E4F5G6")
	cli.fails(2, "--reason is required", "messages", "discard", id)
	cli.fails(2, "unknown messages subcommand", "messages", "frob")
	cli.fails(2, "--output must be table or json", "messages", "list", "--output", "yaml")
	code, secret, errOut := execute(t, "token", "create", "--database", db, "--name", "cli-viewer", "--role", "viewer")
	if code != 0 {
		t.Fatalf("token create: %d %s", code, errOut)
	}
	viewer := cliEnv{t: t, env: map[string]string{EnvServer: cli.env[EnvServer], EnvToken: strings.TrimSpace(secret)}}
	viewer.fails(1, "Forbidden", "messages", "discard", id, "--reason", "no")
	bogus := cliEnv{t: t, env: map[string]string{EnvServer: cli.env[EnvServer], EnvToken: "qt_bogus"}}
	bogus.fails(1, "Unauthorized", "messages", "list")
}

// testCLIReplays: a refused confirmation, create -> watch -> completed,
// pause/resume/cancel, a batch that fails, and the bar on a terminal.
func testCLIReplays(t *testing.T, cli cliEnv, hook *destHook) {
	// 3 of the 4 messages would be published (one has no key): typing
	// another count cancels the draft and changes nothing.
	code, out, errOut := cli.run(nil, "4\n", "replay", "create", "--queue", "work.reports", "--reason", "fixed the reports")
	if code != 1 || !strings.Contains(errOut, `not confirmed: typed "4", the count is 3`) || !strings.Contains(errOut, "Type 3 to replay 3 messages") {
		t.Fatalf("a wrong count: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if !regexp.MustCompile(`to publish:\s+3 of 4 messages`).MatchString(out) || !regexp.MustCompile(`skipped:\s+1 \(`).MatchString(out) {
		t.Fatalf("the preview:\n%s", out)
	}
	refused := reDraftID.FindStringSubmatch(out)
	var b batch
	cli.json(&b, "replay", "show", refused[1])
	if b.State != "cancelled" {
		t.Fatalf("the refused draft is %s, want cancelled", b.State)
	}
	var reports page
	cli.json(&reports, "messages", "list", "--queue", "work.reports", "--status", "quarantined")
	if len(reports.Items) != 4 {
		t.Fatalf("after a refusal %d messages are quarantined, want 4", len(reports.Items))
	}

	// The right count starts it; watch follows it to completed.
	code, out, errOut = cli.run(nil, "3\n", "replay", "create", "--queue", "work.reports", "--reason", "fixed the reports", "--rate", "100")
	if code != 0 || !strings.Contains(out, "follow it with: quarantine replay watch") {
		t.Fatalf("replay create: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	id := reDraftID.FindStringSubmatch(out)[1]
	out = cli.ok("replay", "watch", id, "--interval", "20ms")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, "completed") || !strings.Contains(last, "3 published") || !strings.Contains(last, "1 skipped") {
		t.Fatalf("replay watch:\n%s", out)
	}
	if got := hook.took(); !slices.Equal(got, []string{"r-0", "r-1", "r-2"}) {
		t.Fatalf("the destination took %v", got)
	}
	// The JSON lines of a watch, and the bar drawn on a terminal.
	out = cli.ok("replay", "watch", id, "--output", "json")
	if err := json.Unmarshal([]byte(out), &b); err != nil || b.State != "completed" || b.Counts["published"] != 3 {
		t.Fatalf("replay watch --output json: %v\n%s", err, out)
	}
	code, out, _ = cli.run(func(m *Main) { m.terminal = func(io.Writer) (int, bool) { return 100, true } }, "", "replay", "watch", id)
	if code != 0 || !strings.HasPrefix(out, "\r\x1b[2Kcompleted [") || !strings.Contains(out, strings.Repeat("█", 10)) || !strings.Contains(out, "4/4 100%") {
		t.Fatalf("replay watch on a terminal: exit %d %q", code, out)
	}

	// Pause, resume, cancel a slow batch (1 a second); cancelling puts
	// its pending messages back in quarantine; watch then exits 1.
	code, out, errOut = cli.run(nil, "", "replay", "create", "--queue", "work.slow", "--reason", "slowly", "--rate", "1", "--yes")
	if code != 0 {
		t.Fatalf("replay create --yes: exit %d\n%s\n%s", code, out, errOut)
	}
	slow := reDraftID.FindStringSubmatch(out)[1]
	cli.json(&b, "replay", "pause", slow, "--reason", "the downstream is slow")
	if b.State != "paused" {
		t.Fatalf("after pause: %s", b.State)
	}
	cli.json(&b, "replay", "resume", slow, "--reason", "it recovered")
	if b.State != "running" {
		t.Fatalf("after resume: %s", b.State)
	}
	cli.fails(1, "Conflict", "replay", "start", slow, "--reason", "again")
	cli.json(&b, "replay", "cancel", slow, "--reason", "enough")
	if b.State != "cancelled" {
		t.Fatalf("after cancel: %s", b.State)
	}
	out = cli.fails(1, "ended cancelled: enough", "replay", "watch", slow)
	if !strings.Contains(out, "cancelled") {
		t.Fatalf("watch of a cancelled batch:\n%s", out)
	}
	// An item being published when the batch was cancelled settles
	// after it (wait for it; every one settles within its lease).
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		cli.json(&b, "replay", "show", slow)
		var slowMessages page
		cli.json(&slowMessages, "messages", "list", "--queue", "work.slow")
		statuses := map[string]int{}
		for _, it := range slowMessages.Items {
			statuses[it.Status]++
		}
		if b.Counts["published"]+b.Counts["skipped"] == 4 && b.Counts["skipped"] > 0 && statuses["quarantined"] == b.Counts["skipped"] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cancelled %v: the messages are %v, want the %d skipped quarantined again", b.Counts, statuses, b.Counts["skipped"])
		}
	}

	// Every item refused: the batch fails and so does watch.
	code, out, errOut = cli.run(nil, "", "replay", "create", "--queue", "bad.orders", "--reason", "try", "--yes", "--watch", "--interval", "20ms")
	if code != 1 || !strings.Contains(errOut, "ended failed") || !strings.Contains(out, "2 failed") {
		t.Fatalf("a failing batch: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}

	var list page
	cli.json(&list, "replay", "list", "--state", "completed,failed")
	if len(list.Items) != 2 {
		t.Fatalf("replay list --state completed,failed: %d batches", len(list.Items))
	}
	if out := cli.ok("replay", "list"); countOf(out, "\n") != 5 || !strings.Contains(out, "cancelled") {
		t.Fatalf("replay list:\n%s", out)
	}
}

// testCLIAlarmsAndAudit: an old message fires the alarm, as alarms list
// shows; audit verify --server verifies the chain the commands grew.
func testCLIAlarmsAndAudit(t *testing.T, cli cliEnv) {
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var alarms page
		cli.json(&alarms, "alarms", "list")
		if len(alarms.Items) == 1 && alarms.Items[0].Alarm == "old-orders" && alarms.Items[0].State == "firing" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("alarms list: %+v", alarms.Items)
		}
	}
	if out := cli.ok("alarms", "list"); !regexp.MustCompile(`old-orders\s+old.orders\s+\s*firing`).MatchString(out) {
		t.Fatalf("alarms list:\n%s", out)
	}

	var v struct {
		OK      bool `json:"ok"`
		Checked int  `json:"checked"`
		Head    struct {
			Seq  int64  `json:"seq"`
			Hash string `json:"hash"`
		} `json:"head"`
	}
	cli.json(&v, "audit", "verify", "--server", cli.env[EnvServer])
	if !v.OK || v.Checked < 10 {
		t.Fatalf("audit verify --server: %+v", v)
	}
	out := cli.ok("audit", "verify", "--server", cli.env[EnvServer], "--head-seq", fmt.Sprint(v.Head.Seq), "--head-hash", v.Head.Hash)
	if !regexp.MustCompile(`verified:\s+yes`).MatchString(out) {
		t.Fatalf("audit verify --server with the head:\n%s", out)
	}
	out = cli.fails(1, "does not verify", "audit", "verify", "--server", cli.env[EnvServer], "--head-seq", fmt.Sprint(v.Head.Seq+1000), "--head-hash", strings.Repeat("a", 64))
	if !regexp.MustCompile(`verified:\s+NO`).MatchString(out) {
		t.Fatalf("audit verify --server with a head beyond the chain:\n%s", out)
	}
	cli.fails(2, "--database and --config verify a database", "audit", "verify", "--server", cli.env[EnvServer], "--database", "sqlite:x.db")
}

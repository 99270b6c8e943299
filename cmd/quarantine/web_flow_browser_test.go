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
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// flowChromium is the browser of the flow test: QUARANTINE_CHROMIUM, else
// Debian's /usr/bin/chromium (scripts/services.sh chromium installs it).
// Without it the test skips, but fails under CI.
func flowChromium(t *testing.T) string {
	t.Helper()
	p := os.Getenv("QUARANTINE_CHROMIUM")
	if p == "" {
		p = "/usr/bin/chromium"
	}
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("chromium is required under CI (%v): run scripts/services.sh chromium", err)
		}
		t.Skipf("no chromium at %s: run scripts/services.sh chromium", p)
	}
	return p
}

// flowBrowser is one headless Chromium tab and what its pages wrote to
// the console.
type flowBrowser struct {
	t       *testing.T
	ctx     context.Context
	mu      sync.Mutex
	console []string
	shots   string
}

func newFlowBrowser(t *testing.T) *flowBrowser {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{chromedp.ExecPath(flowChromium(t)), chromedp.UserDataDir(t.TempDir()),
		chromedp.Headless, chromedp.NoSandbox, chromedp.WindowSize(1280, 900)}
	for _, f := range []string{"disable-gpu", "disable-quic", "no-first-run", "disable-background-networking",
		"disable-component-update", "disable-sync", "disable-dev-shm-usage"} {
		opts = append(opts, chromedp.Flag(f, true))
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelA() })
	b := &flowBrowser{t: t, ctx: ctx, shots: filepath.Join("..", "..", "tmp", "web-screenshots")}
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.console = append(b.console, m.String())
			b.mu.Unlock()
		}
	}()
	return b
}

func (b *flowBrowser) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatal(err)
	}
}

func flowRun[T any](b *flowBrowser, a chromedp.Action[T]) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		b.t.Fatal(err)
	}
	return v
}

func (b *flowBrowser) text(sel string) string {
	b.t.Helper()
	return flowRun(b, chromedp.Text(chromedp.CSS(sel)))
}

func (b *flowBrowser) eval(js string) string {
	b.t.Helper()
	return flowRun(b, chromedp.Evaluate[string](js))
}

// screenshot saves the page as NAME.png under tmp/web-screenshots.
func (b *flowBrowser) screenshot(name string) {
	b.t.Helper()
	png := flowRun(b, chromedp.FullScreenshot(100))
	if err := os.MkdirAll(b.shots, 0o755); err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b.shots, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// noInjection checks that no hostile string ran (window.pwned) or became
// an element: these pages have no image, SVG, iframe or object of their
// own, and no script but our static files.
func (b *flowBrowser) noInjection(page string) {
	b.t.Helper()
	if got := b.eval(`typeof window.pwned`); got != "undefined" {
		b.t.Fatalf("%s: window.pwned is %s: a hostile string ran", page, got)
	}
	if n := flowRun(b, chromedp.Evaluate[int](`document.querySelectorAll("img, script:not([src^='/static/']), svg, iframe, object, embed, [onerror], [onload], a[href^='javascript']").length`)); n != 0 {
		b.t.Fatalf("%s: %d injected elements in the DOM", page, n)
	}
}

// flowReceiver is the replay destination: it accepts every POST and keeps
// the bodies by idempotency key.
type flowReceiver struct {
	mu  sync.Mutex
	got map[string][]byte
}

func (rc *flowReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	rc.got[r.Header.Get("Idempotency-Key")] = body
	rc.mu.Unlock()
	w.WriteHeader(http.StatusAccepted)
}

// Hostile strings of the flow: each would set window.pwned if it ran.
const (
	flowHostileReason = `"><img src=x onerror="window.pwned=1"> <a href="javascript:window.pwned=2">x</a> &amp;lt; &#60;b&#62;`
	flowHostileJob    = `<script>window.pwned=3</script>`
	flowHostileHeader = `<svg onload="window.pwned=4"><circle/></svg>`
	flowEditReason    = `fix amount <script>window.pwned=5</script> "><img src=x onerror="window.pwned=6">`
	flowReplayReason  = `dependency fixed <svg/onload="window.pwned=7"> javascript:window.pwned=8`
)

// The whole loop in a real browser against the built server with its
// replay engine: log in with the banner's URL, filter the messages, open
// one, edit it with a reason, dry-run a replay of the queue and start it,
// watch it complete live, then find the edit and the replay in the audit
// view. Hostile strings in the payload, reason, job name, header and the
// reasons typed are text on every page: nothing runs, nothing is injected.
// Screenshots of each page go to tmp/web-screenshots (git-ignored).
func TestServe_WebFlowInBrowser(t *testing.T) {
	b := newFlowBrowser(t)
	rc := &flowReceiver{got: map[string][]byte{}}
	dest := httptest.NewServer(rc)
	t.Cleanup(dest.Close)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "quarantine.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`
database: sqlite:%s
destinations:
  - queues: ["orders"]
    kind: http
    url: %s/replay
replay: {canary: 1, observe: 500ms, poll: 50ms, incident_rate: 1000}
`, filepath.Join(dir, "q.db"), dest.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	m, stderr, _ := serve(t, "--config", cfg)
	banner := reLoginURL.FindStringSubmatch(stderr.String())
	if banner == nil {
		t.Fatalf("no login URL printed:\n%s", stderr)
	}
	base := "http://" + m.Addr()
	admin := client{t: t, base: base, token: banner[1]}
	env := func(id, queue, job, key, reason, payload string, headers map[string]string) string {
		h, _ := json.Marshal(headers)
		return fmt.Sprintf(`{"envelope":"quarantine.failure/v1","job":{"id":%q,"name":%q,"queue":%q,"idempotency_key":%q,
			"headers":%s,"payload":%s},"failure":{"class":"permanent","reason":%q}}`, id, job, queue, key, h, payload, reason)
	}
	var ing struct{ Items []struct{ ID string } }
	admin.json("POST", "/api/v1/ingest", []byte("["+strings.Join([]string{
		env("j1", "orders", "charge", "order-1", "card declined", `{"order":1,"amount":"12.50"}`, nil),
		env("j2", "orders", "charge", "order-2", "card declined", `{"order":2,"amount":"3.00"}`, nil),
		env("j3", "orders", flowHostileJob, "order-3", flowHostileReason,
			`{"order":3,"amount":"1.00","note":"<script>window.pwned=9</script><img src=x onerror=\"window.pwned=10\">"}`,
			map[string]string{"x-evil": flowHostileHeader}),
		env("j4", "billing", "invoice", "inv-1", "timeout", `{"invoice":1}`, nil),
	}, ",")+"]"), 200, &ing)
	if len(ing.Items) != 4 {
		t.Fatalf("ingested %d", len(ing.Items))
	}
	hostileID := ing.Items[2].ID

	// Log in with the banner's URL: the token leaves the address bar.
	b.do(chromedp.Navigate(banner[0]), chromedp.WaitReady(chromedp.CSS("main")))
	if loc := b.eval(`location.href`); strings.Contains(loc, "token") {
		t.Fatalf("after login the address is %q", loc)
	}
	b.screenshot("flow-01-landing")

	// Filter the messages by queue.
	b.do(chromedp.Navigate(base+"/messages"), chromedp.WaitVisible(chromedp.ID("messages")))
	b.do(chromedp.SendKeys(chromedp.CSS(`form.filters input[name="queue"]`), "orders"),
		chromedp.Submit(chromedp.CSS(`form.filters input[name="queue"]`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-id="`+hostileID+`"]`)))
	if n := flowRun(b, chromedp.Evaluate[int](`document.querySelectorAll("#messages tbody tr").length`)); n != 3 {
		t.Fatalf("the filter shows %d rows, want the 3 of orders", n)
	}
	if list := b.text("#messages"); !strings.Contains(list, flowHostileJob) || strings.Contains(list, "invoice") {
		t.Fatalf("filtered list: %s", list)
	}
	b.noInjection("/messages?queue=orders")
	b.screenshot("flow-02-messages-filtered")

	// Open the hostile message.
	b.do(chromedp.Click(chromedp.CSS(`tr[data-id="`+hostileID+`"] a`)), chromedp.WaitVisible(chromedp.ID("payload")))
	if got := b.text("#reason"); got != flowHostileReason {
		t.Fatalf("#reason shows %q, want the text %q", got, flowHostileReason)
	}
	b.noInjection("/messages/{id}")
	b.screenshot("flow-03-message")

	// Edit it: the live check and diff, then save with a hostile reason.
	b.do(chromedp.Click(chromedp.ID("edit")), chromedp.WaitVisible(chromedp.CSS("textarea#payload")))
	if got := b.text("#edit-job"); got != flowHostileJob {
		t.Fatalf("the editor's job shows %q", got)
	}
	b.noInjection("/messages/{id}/edit")
	edited := b.eval(`document.getElementById("payload").value.replace('"1.00"', '1.5')`)
	if !strings.Contains(edited, `"amount": 1.5`) {
		t.Fatalf("the editor holds %q", edited)
	}
	b.do(chromedp.SetValue(chromedp.ID("payload"), edited+"\n{"), // not JSON for a moment
		chromedp.Evaluate[chromedp.Void](`document.getElementById("payload").dispatchEvent(new Event("input"))`),
		chromedp.WaitVisible(chromedp.CSS(`#payload[aria-invalid="true"]`)))
	if got := b.text("#payload-status"); !strings.HasPrefix(got, "Not valid JSON") {
		t.Fatalf("the live check says %q for broken JSON", got)
	}
	b.do(chromedp.SetValue(chromedp.ID("payload"), edited),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("payload").dispatchEvent(new Event("input"))`),
		chromedp.WaitVisible(chromedp.CSS(`#payload:not([aria-invalid]) ~ #diff li.diff-add, #diff li.diff-add`)))
	if got := b.text("#diff li.diff-add .diff-text"); !strings.Contains(got, `"amount": 1.5`) {
		t.Fatalf("the live diff adds %q", got)
	}
	if got := b.text("#diff li.diff-del .diff-text"); !strings.Contains(got, `"amount": "1.00"`) {
		t.Fatalf("the live diff removes %q", got)
	}
	b.do(chromedp.SendKeys(chromedp.ID("reason"), flowEditReason))
	b.noInjection("/messages/{id}/edit with the diff")
	b.screenshot("flow-04-edit")
	// The message page shows the payload in a <pre> (the editor's is a <textarea>).
	b.do(chromedp.Click(chromedp.ID("save")), chromedp.WaitVisible(chromedp.CSS("pre#payload")))
	if loc := b.eval(`location.pathname`); loc != "/messages/"+hostileID {
		t.Fatalf("after the save: %s", loc)
	}
	if got := b.text("#payload"); !strings.Contains(got, `"amount": 1.5`) {
		t.Fatalf("the message shows %q after the edit", got)
	}
	if page := b.text("main"); !strings.Contains(page, flowEditReason) {
		t.Fatalf("the timeline lacks the edit's reason as text:\n%s", page)
	}
	b.noInjection("/messages/{id} after the edit")
	b.screenshot("flow-05-message-edited")

	// Replay the queue: the form pins 3, the dry run lists them, Start.
	b.do(chromedp.Navigate(base+"/replays/new?queue=orders&status=quarantined"), chromedp.WaitVisible(chromedp.ID("replay-form")))
	if got := b.text("#selection-count"); !strings.HasPrefix(got, "3 message(s)") {
		t.Fatalf("selection: %q", got)
	}
	b.do(chromedp.SetValue(chromedp.ID("rate"), "20"), chromedp.SendKeys(chromedp.ID("reason"), flowReplayReason))
	b.screenshot("flow-06-replay-new")
	b.do(chromedp.Click(chromedp.ID("dry-run")), chromedp.WaitVisible(chromedp.CSS(`#replay[data-state="draft"]`)))
	if n := flowRun(b, chromedp.Evaluate[int](`document.querySelectorAll("#replay-items tbody tr").length`)); n != 3 {
		t.Fatalf("the preview lists %d messages, want 3", n)
	}
	if got := b.text("#replay-reason"); got != flowReplayReason {
		t.Fatalf("the replay's reason shows %q", got)
	}
	b.text("#replay-estimate")
	b.noInjection("/replays/{id} draft")
	b.screenshot("flow-07-replay-preview")
	replayID := b.eval(`document.getElementById("replay").dataset.id`)
	b.do(chromedp.SendKeys(chromedp.ID("reason-start"), "go"), chromedp.Click(chromedp.ID("start")),
		chromedp.WaitVisible(chromedp.CSS(`#replay:not([data-state="draft"])`)))
	b.screenshot("flow-08-replay-running")
	// replay.js polls and reloads the page when the state changes.
	b.do(chromedp.WaitVisible(chromedp.CSS(`#replay[data-state="completed"]`)))
	if got := b.text(`td[data-count="published"]`); got != "3" {
		t.Fatalf("published %s, want 3", got)
	}
	if got := b.text("#replay-canary"); got != "passed" {
		t.Fatalf("canary %q", got)
	}
	b.noInjection("/replays/{id} completed")
	b.screenshot("flow-09-replay-completed")
	rc.mu.Lock()
	got := rc.got["order-3"]
	n := len(rc.got)
	rc.mu.Unlock()
	if n != 3 || !strings.Contains(string(got), `"amount":1.5`) {
		t.Fatalf("the destination got %d messages; order-3 is %s", n, got)
	}

	// The replays list, then the audit view: the edit and the replay.
	b.do(chromedp.Navigate(base+"/replays"), chromedp.WaitVisible(chromedp.CSS(`tr[data-id="`+replayID+`"]`)))
	b.noInjection("/replays")
	b.screenshot("flow-10-replays")
	b.do(chromedp.Navigate(base+"/audit"), chromedp.WaitVisible(chromedp.ID("audit")))
	rows := b.eval(`JSON.stringify([...document.querySelectorAll("#audit tbody tr")].map(r => r.querySelector(".action").textContent + " " + r.querySelector(".subject").textContent.trim()))`)
	for _, want := range []string{"message.edit " + hostileID, "replay.create " + replayID, "replay.start " + replayID, "replay.complete " + replayID} {
		if !strings.Contains(rows, want) {
			t.Fatalf("the audit view lacks %q: %s", want, rows)
		}
	}
	if page := b.text("#audit"); !strings.Contains(page, "fix amount") {
		t.Fatalf("the audit view lacks the edit's reason: %s", page)
	}
	b.noInjection("/audit")
	b.screenshot("flow-11-audit")

	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.console) > 0 {
		t.Fatalf("the pages wrote to the console: %q", b.console)
	}
}

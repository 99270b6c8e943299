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

	"github.com/chromedp/chromedp"

	"github.com/quarantine-dev/quarantine/internal/browsertest"
)

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
	b := browsertest.New(t, chromedp.WindowSize(1280, 900))
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
	// The age sampler's first sample, of the empty quarantine, is taken
	// as serve starts.
	for deadline := time.Now().Add(20 * time.Second); m.alarms.sampler.Steps() < 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the age sampler took no sample in 20 s")
		}
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
	b.Do(chromedp.Navigate(banner[0]), chromedp.WaitReady(chromedp.CSS("main")))
	if loc := b.Eval(`location.href`); strings.Contains(loc, "token") {
		t.Fatalf("after login the address is %q", loc)
	}
	// The overview charts the sampler's samples in its age history (the
	// first, of the empty quarantine, and maybe one more if a minute
	// began since): the current hour's row is sampled. Its SVG charts are
	// its own elements; no other is.
	if got := b.Eval(`document.querySelector("#history-table tbody tr:last-child").textContent`); strings.Contains(got, "no sample") {
		t.Fatalf("the age history's current hour has no sample: %q", got)
	}
	if n := browsertest.Run(b, chromedp.Evaluate[int](`document.querySelectorAll("svg.agehistory circle").length`)); n < 1 || n > 2 {
		t.Fatalf("the age history draws %d points, want the sampler's (1 or 2)", n)
	}
	b.NoInjectionBut("/overview", "svg.spark", "svg.agechart", "svg.agehistory")
	b.Screenshot("flow-01-landing")

	// Filter the messages by queue (a field of the "more filters" box).
	b.Do(chromedp.Navigate(base+"/messages"), chromedp.WaitVisible(chromedp.ID("messages")))
	b.Do(chromedp.Click(chromedp.CSS(`#more-filters > summary`)), chromedp.WaitVisible(chromedp.CSS(`form.filters input[name="queue"]`)))
	b.Do(chromedp.SendKeys(chromedp.CSS(`form.filters input[name="queue"]`), "orders"),
		chromedp.Submit(chromedp.CSS(`form.filters input[name="queue"]`)))
	// The unfiltered page holds the row too: wait for the filtered one.
	b.WaitFor(`new URLSearchParams(location.search).get("queue") === "orders" && document.readyState === "complete"`)
	b.Do(chromedp.WaitVisible(chromedp.CSS(`tr[data-id="` + hostileID + `"]`)))
	if n := browsertest.Run(b, chromedp.Evaluate[int](`document.querySelectorAll("#messages tbody tr").length`)); n != 3 {
		t.Fatalf("the filter shows %d rows, want the 3 of orders", n)
	}
	if list := b.Text("#messages"); !strings.Contains(list, flowHostileJob) || strings.Contains(list, "invoice") {
		t.Fatalf("filtered list: %s", list)
	}
	b.NoInjection("/messages?queue=orders")
	b.Screenshot("flow-02-messages-filtered")

	// Open the hostile message.
	b.Do(chromedp.Click(chromedp.CSS(`tr[data-id="`+hostileID+`"] a`)), chromedp.WaitVisible(chromedp.ID("payload")))
	if got := b.Text("#reason"); got != flowHostileReason {
		t.Fatalf("#reason shows %q, want the text %q", got, flowHostileReason)
	}
	b.NoInjection("/messages/{id}")
	b.Screenshot("flow-03-message")

	// Edit it: the live check and diff, then save with a hostile reason.
	b.Do(chromedp.Click(chromedp.ID("edit")), chromedp.WaitVisible(chromedp.CSS("textarea#payload")))
	if got := b.Text("#edit-job"); got != flowHostileJob {
		t.Fatalf("the editor's job shows %q", got)
	}
	b.NoInjection("/messages/{id}/edit")
	edited := b.Eval(`document.getElementById("payload").value.replace('"1.00"', '1.5')`)
	if !strings.Contains(edited, `"amount": 1.5`) {
		t.Fatalf("the editor holds %q", edited)
	}
	b.Do(chromedp.SetValue(chromedp.ID("payload"), edited+"\n{"), // not JSON for a moment
		chromedp.Evaluate[chromedp.Void](`document.getElementById("payload").dispatchEvent(new Event("input"))`),
		chromedp.WaitVisible(chromedp.CSS(`#payload[aria-invalid="true"]`)))
	if got := b.Text("#payload-status"); !strings.HasPrefix(got, "Not valid JSON") {
		t.Fatalf("the live check says %q for broken JSON", got)
	}
	b.Do(chromedp.SetValue(chromedp.ID("payload"), edited),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("payload").dispatchEvent(new Event("input"))`),
		chromedp.WaitVisible(chromedp.CSS(`#changes tr.change-change`)))
	// The live diff is structural: one value changed, at its pointer.
	if got := b.Eval(`JSON.stringify([...document.querySelectorAll("#changes tbody tr")].map(r => [...r.cells].map(c => c.textContent)))`); got != `[["/amount","changed","\"1.00\"","1.5"]]` {
		t.Fatalf("the live diff shows %s", got)
	}
	b.Do(chromedp.SendKeys(chromedp.ID("reason"), flowEditReason))
	b.NoInjection("/messages/{id}/edit with the diff")
	b.Screenshot("flow-04-edit")
	// The message page shows the payload in a <pre> (the editor's is a <textarea>).
	b.Do(chromedp.Click(chromedp.ID("save")), chromedp.WaitVisible(chromedp.CSS("pre#payload")))
	if loc := b.Eval(`location.pathname`); loc != "/messages/"+hostileID {
		t.Fatalf("after the save: %s", loc)
	}
	if got := b.Text("#payload"); !strings.Contains(got, `"amount": 1.5`) {
		t.Fatalf("the message shows %q after the edit", got)
	}
	if got := b.Text("#flash"); !strings.HasPrefix(got, "Saved: the payload is now version 2") {
		t.Fatalf("the save is confirmed as %q", got)
	}
	if page := b.Text("main"); !strings.Contains(page, flowEditReason) {
		t.Fatalf("the timeline lacks the edit's reason as text:\n%s", page)
	}
	b.NoInjection("/messages/{id} after the edit")
	b.Screenshot("flow-05-message-edited")

	// Replay the queue: the form pins 3, the dry run lists them, Start.
	b.Do(chromedp.Navigate(base+"/replays/new?queue=orders&status=quarantined"), chromedp.WaitVisible(chromedp.ID("replay-form")))
	if got := b.Text("#selection-count"); !strings.HasPrefix(got, "3 message(s)") {
		t.Fatalf("selection: %q", got)
	}
	b.Do(chromedp.SetValue(chromedp.ID("rate"), "20"), chromedp.SendKeys(chromedp.ID("reason"), flowReplayReason))
	b.Screenshot("flow-06-replay-new")
	b.Do(chromedp.Click(chromedp.ID("dry-run")), chromedp.WaitVisible(chromedp.CSS(`#replay[data-state="draft"]`)))
	if n := browsertest.Run(b, chromedp.Evaluate[int](`document.querySelectorAll("#replay-items tbody tr").length`)); n != 3 {
		t.Fatalf("the preview lists %d messages, want 3", n)
	}
	if got := b.Text("#replay-reason"); got != flowReplayReason {
		t.Fatalf("the replay's reason shows %q", got)
	}
	b.Text("#replay-estimate")
	b.NoInjection("/replays/{id} draft")
	b.Screenshot("flow-07-replay-preview")
	replayID := b.Eval(`document.getElementById("replay").dataset.id`)
	// Start records the replay's reason: it is not asked again.
	if got := b.Text("#start-reason"); !strings.Contains(got, flowReplayReason) {
		t.Fatalf("Start says it records %q", got)
	}
	b.Do(chromedp.Click(chromedp.ID("start")),
		chromedp.WaitVisible(chromedp.CSS(`#replay:not([data-state="draft"])`)))
	b.Screenshot("flow-08-replay-running")
	// replay.js polls and reloads the page when the state changes.
	b.Do(chromedp.WaitVisible(chromedp.CSS(`#replay[data-state="completed"]`)))
	if got := b.Text(`td[data-count="published"]`); got != "3" {
		t.Fatalf("published %s, want 3", got)
	}
	if got := b.Text("#replay-canary"); got != "passed" {
		t.Fatalf("canary %q", got)
	}
	b.NoInjection("/replays/{id} completed")
	b.Screenshot("flow-09-replay-completed")
	rc.mu.Lock()
	got := rc.got["order-3"]
	n := len(rc.got)
	rc.mu.Unlock()
	if n != 3 || !strings.Contains(string(got), `"amount":1.5`) {
		t.Fatalf("the destination got %d messages; order-3 is %s", n, got)
	}

	// The replays list, then the audit view: the edit and the replay.
	b.Do(chromedp.Navigate(base+"/replays"), chromedp.WaitVisible(chromedp.CSS(`tr[data-id="`+replayID+`"]`)))
	b.NoInjection("/replays")
	b.Screenshot("flow-10-replays")
	b.Do(chromedp.Navigate(base+"/audit"), chromedp.WaitVisible(chromedp.ID("audit")))
	rows := b.Eval(`JSON.stringify([...document.querySelectorAll("#audit tbody tr")].map(r => r.querySelector(".action").textContent + " " + r.querySelector(".subject code.id").title))`)
	for _, want := range []string{"message.edit " + hostileID, "replay.create " + replayID, "replay.start " + replayID, "replay.complete " + replayID} {
		if !strings.Contains(rows, want) {
			t.Fatalf("the audit view lacks %q: %s", want, rows)
		}
	}
	if page := b.Text("#audit"); !strings.Contains(page, "fix amount") {
		t.Fatalf("the audit view lacks the edit's reason: %s", page)
	}
	b.NoInjection("/audit")
	b.Screenshot("flow-11-audit")

	b.NoConsole()
}

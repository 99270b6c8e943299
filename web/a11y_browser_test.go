package web_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/browsertest"
)

// a11yFixture is what the pages of a11yPages are about.
type a11yFixture struct {
	message *quarantine.Message
	replay  *quarantine.ReplayBatch
}

// a11yPage is one page of the UI the accessibility test loads, logged in
// as an admin (every control shown) unless anonymous.
type a11yPage struct {
	name      string
	path      func(f *a11yFixture) string
	anonymous bool
}

func fixed(p string) func(*a11yFixture) string { return func(*a11yFixture) string { return p } }

// a11yPages is every page of the UI reachable at test time: add a page
// here when it is built.
var a11yPages = []a11yPage{
	{name: "login", path: fixed("/login"), anonymous: true},
	{name: "overview", path: fixed("/overview")},
	{name: "messages", path: fixed("/messages")},
	{name: "messages-filtered", path: fixed("/messages?queue=orders&status=quarantined&q=declined")},
	{name: "sample", path: fixed("/messages/sample?queue=orders&n=5")},
	{name: "message", path: func(f *a11yFixture) string { return "/messages/" + f.message.ID }},
	{name: "edit", path: func(f *a11yFixture) string { return "/messages/" + f.message.ID + "/edit" }},
	{name: "groups", path: fixed("/groups")},
	{name: "bulk", path: func(f *a11yFixture) string { return "/messages/bulk?ids=" + f.message.ID }},
	{name: "bulk-all", path: fixed("/messages/bulk?all=1&queue=orders")},
	{name: "replay-new", path: fixed("/replays/new?queue=orders")},
	{name: "replays", path: fixed("/replays")},
	{name: "replay", path: func(f *a11yFixture) string { return "/replays/" + f.replay.ID }},
	{name: "audit", path: fixed("/audit")},
	{name: "notfound", path: fixed("/nowhere")},
}

// Every page has no serious or critical axe-core violation, and writes
// nothing to the browser console.
func TestUIBrowserAccessibility(t *testing.T) {
	b := browsertest.New(t)
	axe := browsertest.Axe(t)
	e := newEnv(t)
	secret := e.token("admin", quarantine.RoleAdmin)
	f := &a11yFixture{message: e.message(quarantine.Message{Queue: "orders", JobName: "charge", Reason: "card declined",
		Payload: []byte(`{"order":42,"card":{"number":"4111"}}`), IdempotencyKey: "order-42",
		Headers: map[string]string{"x-trace": "t-1"}})}
	e.message(quarantine.Message{Queue: "billing", JobName: "invoice", Reason: "timeout", Payload: []byte("not json \x00\x01")})
	// A sample of the ages: the overview draws its age history.
	if _, err := e.store.SampleAges(context.Background(), time.Now()); err != nil {
		t.Fatal(err)
	}
	var err error
	f.replay, err = e.store.CreateReplay(context.Background(), quarantine.ReplayRequest{IDs: []string{f.message.ID},
		Rate: 10, DryRun: true, Reason: "accessibility test", Actor: "test", DraftTTL: time.Hour}, nil)
	if err != nil {
		t.Fatal(err)
	}

	loggedIn := false
	for _, p := range a11yPages {
		if p.anonymous == loggedIn {
			if loggedIn {
				b.Do(chromedp.Navigate(e.srv.URL+"/overview"), chromedp.WaitVisible(chromedp.ID("logout")),
					chromedp.Click(chromedp.ID("logout")), chromedp.WaitVisible(chromedp.ID("token")))
			} else {
				b.Do(chromedp.Navigate(e.srv.URL+"/?token="+secret), chromedp.WaitVisible(chromedp.ID("logout")))
			}
			loggedIn = !loggedIn
		}
		u := p.path(f)
		b.Do(chromedp.Navigate(e.srv.URL+u), chromedp.WaitVisible(chromedp.CSS("main h1")))
		if h1 := browsertest.Run(b, chromedp.Text(chromedp.CSS("main h1"))); p.name != "notfound" && (h1 == "Not found" || h1 == "Error" || h1 == "Refused") {
			t.Fatalf("%s (%s) is an error page: %q", p.name, u, h1)
		}
		for _, v := range b.AxeViolations(axe) {
			t.Errorf("%s (%s): %s %s: %s\n\t%s", p.name, u, v.Impact, v.ID, v.Help, strings.Join(v.Nodes, "\n\t"))
		}
		b.Screenshot("a11y-" + p.name)
		for _, m := range b.Console() {
			// The not-found page is a 404, which the browser logs.
			if p.name != "notfound" || !strings.Contains(m, "status of 404") {
				t.Errorf("%s (%s) wrote to the console: %q", p.name, u, m)
			}
		}
	}
}

// The keyboard: "/" focuses the search box, j and k move over the rows,
// the arrows too once a row has the focus, and Enter opens the row.
func TestUIBrowserKeyboard(t *testing.T) {
	b := browsertest.New(t)
	e := newEnv(t)
	secret := e.token("admin", quarantine.RoleAdmin)
	var msgs []*quarantine.Message
	for i := range 3 {
		failed := time.Now().Add(-time.Duration(i+1) * time.Minute)
		msgs = append(msgs, e.message(quarantine.Message{Queue: "orders", Reason: "r", Payload: []byte(`{}`), FailedAt: failed}))
	}
	b.Do(chromedp.Navigate(e.srv.URL+"/?token="+secret), chromedp.WaitVisible(chromedp.ID("logout")))
	b.Do(chromedp.Navigate(e.srv.URL+"/messages"), chromedp.WaitVisible(chromedp.ID("messages")))
	active := func() string {
		return browsertest.Run(b, chromedp.Evaluate[string](`(document.activeElement.closest("[data-row]") || {dataset: {}}).dataset.id || document.activeElement.name || document.activeElement.tagName`))
	}
	keys := func(k string) { b.Do(chromedp.KeyEvent(k)) }

	// "/" as a browser sends it: a keydown whose default action (typing
	// the slash) app.js prevents. (chromedp's KeyEvent sends the char as a
	// separate protocol event, which no keydown handler can cancel.)
	typed := browsertest.Run(b, chromedp.Evaluate[bool](`document.body.dispatchEvent(new KeyboardEvent("keydown", {key: "/", bubbles: true, cancelable: true}))`))
	if got := active(); got != "q" || typed {
		t.Fatalf("after /, the focus is on %q (default action kept: %v), want the search box and no slash typed", got, typed)
	}
	// Typing in the search box types; Escape leaves it.
	keys("j")
	if v := browsertest.Run(b, chromedp.Evaluate[string](`document.getElementById("q").value`)); v != "j" {
		t.Fatalf("j typed in the search box gave %q", v)
	}
	b.Do(chromedp.Evaluate[chromedp.Void](`document.getElementById("q").value = ""`))
	keys(kb.Escape)
	// Newest first: msgs[0], msgs[1], msgs[2].
	for _, step := range []struct{ key, want string }{
		{"j", msgs[0].ID}, {"j", msgs[1].ID}, {"j", msgs[2].ID}, {"j", msgs[2].ID}, {"k", msgs[1].ID},
		{kb.ArrowUp, msgs[0].ID}, {kb.ArrowDown, msgs[1].ID},
	} {
		keys(step.key)
		if got := active(); got != step.want {
			t.Fatalf("after %q the focus is on row %q, want %q", step.key, got, step.want)
		}
		if n := browsertest.Run(b, chromedp.Evaluate[int](`document.querySelectorAll("[data-row].current").length`)); n != 1 {
			t.Fatalf("after %q, %d rows are current, want 1", step.key, n)
		}
	}
	keys(kb.Enter)
	b.Do(chromedp.WaitVisible(chromedp.ID("payload")))
	if p := browsertest.Run(b, chromedp.Evaluate[string](`location.pathname`)); p != "/messages/"+msgs[1].ID {
		t.Fatalf("Enter opened %q, want the current row's message %s", p, msgs[1].ID)
	}
	b.NoConsole()
}

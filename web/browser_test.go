package web_test

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/quarantine-dev/quarantine"
)

// chromiumPath is the browser of the UI tests: QUARANTINE_CHROMIUM, else
// Debian's /usr/bin/chromium (scripts/services.sh chromium installs it).
func chromiumPath(t *testing.T) string {
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

// browser is one headless Chromium tab, with what its pages wrote to
// the console.
type browser struct {
	t       *testing.T
	ctx     context.Context
	mu      sync.Mutex
	console []string
	shots   string // folder of the screenshots (git-ignored)
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Headless, chromedp.NoSandbox,
	}
	for _, f := range []string{"disable-gpu", "disable-quic", "no-first-run", "disable-background-networking",
		"disable-component-update", "disable-sync", "disable-dev-shm-usage"} {
		opts = append(opts, chromedp.Flag(f, true))
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelA() })
	b := &browser{t: t, ctx: ctx, shots: filepath.Join("..", "tmp", "web-screenshots")}
	// Start the browser (no timeout on this first run: it would stop it).
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

// do runs steps with a timeout.
func (b *browser) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatal(err)
	}
}

func run[T any](b *browser, a chromedp.Action[T]) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		b.t.Fatal(err)
	}
	return v
}

// screenshot saves the page as NAME.png under tmp/web-screenshots.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	png := run(b, chromedp.FullScreenshot(100))
	if err := os.MkdirAll(b.shots, 0o755); err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b.shots, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// noInjection checks that no hostile string ran or became an element.
func (b *browser) noInjection(page string) {
	b.t.Helper()
	if got := run(b, chromedp.Evaluate[string](`typeof window.pwned`)); got != "undefined" {
		b.t.Fatalf("%s: window.pwned is %s: a payload ran", page, got)
	}
	// These pages have no image, SVG, iframe or object of their own, and
	// no script but our static files: any other is injected.
	if n := run(b, chromedp.Evaluate[int](`document.querySelectorAll("img, script:not([src^='/static/']), svg, iframe, object, embed, [onerror], [onload], a[href^='javascript']").length`)); n != 0 {
		b.t.Fatalf("%s: %d injected elements in the DOM", page, n)
	}
}

const hostilePayload = `<script>window.pwned=1</script><img src=x onerror="window.pwned=2">`

func TestUIBrowserLoginListMessageXSSLogout(t *testing.T) {
	b := newBrowser(t)
	e := newEnv(t)
	secret := e.token("admin", quarantine.RoleAdmin)
	plain := e.message(quarantine.Message{Queue: "orders", JobName: "charge", Payload: []byte(`{"order":42}`), Reason: "card declined"})
	hostile := e.message(quarantine.Message{
		Queue:       `<script>window.pwned=3</script>`,
		JobName:     `"><svg onload="window.pwned=4">`,
		Reason:      `"><img src=x onerror="window.pwned=5"> <a href="javascript:window.pwned=6">x</a> &amp;lt;`,
		Headers:     map[string]string{"x-evil": `<img src=x onerror="window.pwned=7">`},
		Payload:     []byte(hostilePayload),
		ContentType: "text/html",
	})

	// The banner's URL lands on /overview, the token gone from the URL.
	b.do(chromedp.Navigate(e.srv.URL + "/?token=" + url.QueryEscape(secret)))
	b.do(chromedp.WaitVisible(chromedp.ID("queues")))
	if loc := run(b, chromedp.Evaluate[string](`location.href`)); loc != e.srv.URL+"/overview" || strings.Contains(loc, "token") {
		t.Fatalf("after login location is %q, want %s/overview", loc, e.srv.URL)
	}
	if n := run(b, chromedp.Evaluate[int](`history.length`)); n > 2 {
		t.Fatalf("history holds %d entries", n)
	}
	b.do(chromedp.Navigate(e.srv.URL+"/messages"), chromedp.WaitVisible(chromedp.ID("messages")))
	list := run(b, chromedp.Text(chromedp.ID("messages")))
	for _, want := range []string{"orders", "charge", "card declined", `<script>window.pwned=3</script>`, `"><svg onload="window.pwned=4">`} {
		if !strings.Contains(list, want) {
			t.Fatalf("the list lacks %q as text: %s", want, list)
		}
	}
	b.noInjection("/messages")
	b.screenshot("messages")

	// The plain message, by its link.
	b.do(chromedp.Click(chromedp.CSS(`tr[data-id="`+plain.ID+`"] a`)), chromedp.WaitVisible(chromedp.ID("payload")))
	if got := run(b, chromedp.Text(chromedp.ID("payload"))); !strings.Contains(got, `"order": 42`) {
		t.Fatalf("JSON payload not pretty-printed: %q", got)
	}

	// The hostile message: every field is text.
	b.do(chromedp.Navigate(e.srv.URL+"/messages/"+hostile.ID), chromedp.WaitVisible(chromedp.ID("payload")))
	for id, want := range map[string]string{"payload": hostilePayload, "reason": hostile.Reason, "queue": hostile.Queue, "job": hostile.JobName} {
		if got := run(b, chromedp.Text(chromedp.ID(id))); got != want {
			t.Fatalf("#%s shows %q, want the text %q", id, got, want)
		}
	}
	if got := run(b, chromedp.Text(chromedp.ID("headers"))); !strings.Contains(got, hostile.Headers["x-evil"]) {
		t.Fatalf("headers: %q", got)
	}
	b.noInjection("/messages/{id}")
	b.screenshot("message-hostile")

	// Logout ends the session: the next page is the login form.
	b.do(chromedp.Click(chromedp.ID("logout")), chromedp.WaitVisible(chromedp.ID("token")))
	b.do(chromedp.Navigate(e.srv.URL+"/messages"), chromedp.WaitVisible(chromedp.ID("token")))
	if loc := run(b, chromedp.Evaluate[string](`location.pathname`)); loc != "/login" {
		t.Fatalf("after logout /messages leads to %q, want /login", loc)
	}
	b.screenshot("login")

	// The login form logs in again.
	b.do(chromedp.SendKeys(chromedp.ID("token"), secret), chromedp.Submit(chromedp.ID("token")), chromedp.WaitVisible(chromedp.ID("queues")))
	if loc := run(b, chromedp.Evaluate[string](`location.pathname + location.search`)); loc != "/overview" {
		t.Fatalf("after the login form: %q", loc)
	}

	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.console) > 0 {
		t.Fatalf("the pages wrote to the console: %q", b.console)
	}
}

// A POST without its CSRF token is refused, even with the session cookie
// (net/http: a browser would not send it cross-site at all).
func TestUIPostWithoutCSRFRefused(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	e.login(c, e.token("admin", quarantine.RoleAdmin))
	for _, v := range []url.Values{{}, {"csrf": {""}}, {"csrf": {"x"}}} {
		res, _ := postForm(t, c, e.srv.URL+"/logout", v)
		if res.StatusCode != http.StatusForbidden {
			t.Fatalf("POST /logout %v: %d, want 403", v, res.StatusCode)
		}
	}
	if res, _ := get(t, c, e.srv.URL+"/messages"); res.StatusCode != http.StatusOK {
		t.Fatalf("the session must survive refused POSTs: %d", res.StatusCode)
	}
}

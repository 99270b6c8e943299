package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/browsertest"
)

const hostilePayload = `<script>window.pwned=1</script><img src=x onerror="window.pwned=2">`

func TestUIBrowserLoginListMessageXSSLogout(t *testing.T) {
	b := browsertest.New(t)
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
	b.Do(chromedp.Navigate(e.srv.URL + "/?token=" + url.QueryEscape(secret)))
	b.Do(chromedp.WaitVisible(chromedp.ID("queues")))
	if loc := browsertest.Run(b, chromedp.Evaluate[string](`location.href`)); loc != e.srv.URL+"/overview" || strings.Contains(loc, "token") {
		t.Fatalf("after login location is %q, want %s/overview", loc, e.srv.URL)
	}
	if n := browsertest.Run(b, chromedp.Evaluate[int](`history.length`)); n > 2 {
		t.Fatalf("history holds %d entries", n)
	}
	b.Do(chromedp.Navigate(e.srv.URL+"/messages"), chromedp.WaitVisible(chromedp.ID("messages")))
	list := browsertest.Run(b, chromedp.Text(chromedp.ID("messages")))
	for _, want := range []string{"orders", "charge", "card declined", `<script>window.pwned=3</script>`, `"><svg onload="window.pwned=4">`} {
		if !strings.Contains(list, want) {
			t.Fatalf("the list lacks %q as text: %s", want, list)
		}
	}
	b.NoInjection("/messages")
	b.Screenshot("messages")

	// The plain message, by its link.
	b.Do(chromedp.Click(chromedp.CSS(`tr[data-id="`+plain.ID+`"] a`)), chromedp.WaitVisible(chromedp.ID("payload")))
	if got := browsertest.Run(b, chromedp.Text(chromedp.ID("payload"))); !strings.Contains(got, `"order": 42`) {
		t.Fatalf("JSON payload not pretty-printed: %q", got)
	}

	// The hostile message: every field is text.
	b.Do(chromedp.Navigate(e.srv.URL+"/messages/"+hostile.ID), chromedp.WaitVisible(chromedp.ID("payload")))
	for id, want := range map[string]string{"payload": hostilePayload, "reason": hostile.Reason, "queue": hostile.Queue, "job": hostile.JobName} {
		if got := browsertest.Run(b, chromedp.Text(chromedp.ID(id))); got != want {
			t.Fatalf("#%s shows %q, want the text %q", id, got, want)
		}
	}
	if got := browsertest.Run(b, chromedp.Text(chromedp.ID("headers"))); !strings.Contains(got, hostile.Headers["x-evil"]) {
		t.Fatalf("headers: %q", got)
	}
	b.NoInjection("/messages/{id}")
	b.Screenshot("message-hostile")

	// Logout ends the session: the next page is the login form.
	b.Do(chromedp.Click(chromedp.ID("logout")), chromedp.WaitVisible(chromedp.ID("token")))
	b.Do(chromedp.Navigate(e.srv.URL+"/messages"), chromedp.WaitVisible(chromedp.ID("token")))
	if loc := browsertest.Run(b, chromedp.Evaluate[string](`location.pathname`)); loc != "/login" {
		t.Fatalf("after logout /messages leads to %q, want /login", loc)
	}
	b.Screenshot("login")

	// The login form logs in again.
	b.Do(chromedp.SendKeys(chromedp.ID("token"), secret), chromedp.Submit(chromedp.ID("token")), chromedp.WaitVisible(chromedp.ID("queues")))
	if loc := browsertest.Run(b, chromedp.Evaluate[string](`location.pathname + location.search`)); loc != "/overview" {
		t.Fatalf("after the login form: %q", loc)
	}

	b.NoConsole()
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

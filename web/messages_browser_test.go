package web_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/browsertest"
)

// An operator checks two rows, discards them with a reason, takes a
// sample, opens the failure groups and goes from a group to its
// messages.
func TestUIBrowserSelectDiscardSampleGroups(t *testing.T) {
	b := browsertest.New(t)
	axe := browsertest.Axe(t)
	e := newEnv(t)
	secret := e.token("op", quarantine.RoleOperator)
	var declined []*quarantine.Message
	for range 4 {
		declined = append(declined, e.message(quarantine.Message{Queue: "orders", JobName: "charge", FailureClass: quarantine.ClassPermanent,
			Reason: "card declined", Payload: []byte(`{"n":1}`)}))
	}
	timeout := e.message(quarantine.Message{Queue: "orders", JobName: "ship", FailureClass: quarantine.ClassExhausted, Reason: "carrier timeout", Payload: []byte(`{}`)})

	b.Do(chromedp.Navigate(e.srv.URL+"/?token="+url.QueryEscape(secret)), chromedp.WaitVisible(chromedp.ID("logout")))
	b.Do(chromedp.Navigate(e.srv.URL+"/messages"), chromedp.WaitVisible(chromedp.ID("messages")))
	pick := func(id string) chromedp.Action[chromedp.Void] {
		return chromedp.Click(chromedp.CSS(`input[name="ids"][value="` + id + `"]`))
	}
	b.Do(pick(declined[0].ID), pick(declined[2].ID))
	b.Screenshot("messages-selection")
	b.Do(chromedp.Click(chromedp.ID("discard-selected")), chromedp.WaitVisible(chromedp.ID("discard-form")))
	if got := browsertest.Run(b, chromedp.Text(chromedp.ID("count"))); got != "2" {
		t.Fatalf("the selection counts %q, want 2", got)
	}
	b.Screenshot("bulk-discard")
	b.AxeClean(axe, "/messages/bulk")
	b.Do(chromedp.SendKeys(chromedp.ID("reason"), "poison pills"), chromedp.Click(chromedp.ID("discard")), chromedp.WaitVisible(chromedp.ID("result")))
	if got := browsertest.Run(b, chromedp.Text(chromedp.ID("changed-count"))); got != "2" {
		t.Fatalf("discarded %q, want 2", got)
	}
	b.AxeClean(axe, "POST /messages/discard")
	for i, m := range declined {
		want := quarantine.StatusQuarantined
		if i == 0 || i == 2 {
			want = quarantine.StatusDiscarded
		}
		if got := e.statusOf(m.ID); got != want {
			t.Fatalf("message %d is %s, want %s", i, got, want)
		}
	}
	if evs := e.audit(quarantine.ActionDiscard); len(evs) != 2 || !strings.Contains(string(evs[0].Details), "poison pills") {
		t.Fatalf("discard events %+v", evs)
	}

	// Sample 2 of the quarantined orders.
	b.Do(chromedp.Navigate(e.srv.URL+"/messages?queue=orders&status=quarantined"), chromedp.WaitVisible(chromedp.ID("sample-size")))
	b.Do(chromedp.SetValue(chromedp.ID("sample-size"), "2"), chromedp.Click(chromedp.ID("sample")), chromedp.WaitVisible(chromedp.ID("sample-info")))
	if n := browsertest.Run(b, chromedp.Evaluate[int](`document.querySelectorAll("#messages tbody tr").length`)); n != 2 {
		t.Fatalf("the sample has %d rows, want 2", n)
	}
	loc := browsertest.Run(b, chromedp.Evaluate[string](`location.search`))
	if !strings.Contains(loc, "queue=orders") || !strings.Contains(loc, "status=quarantined") || !strings.Contains(loc, "size=2") {
		t.Fatalf("the sample lost the filter: %s", loc)
	}
	seed := browsertest.Run(b, chromedp.Text(chromedp.ID("seed")))
	b.Screenshot("sample")
	first := browsertest.Run(b, chromedp.Evaluate[string](`[...document.querySelectorAll("#messages tbody tr")].map(r => r.dataset.id).join()`))
	b.Do(chromedp.Click(chromedp.ID("sample-again")), chromedp.WaitVisible(chromedp.ID("sample-info")))
	again := browsertest.Run(b, chromedp.Evaluate[string](`[...document.querySelectorAll("#messages tbody tr")].map(r => r.dataset.id).join()`))
	if again != first || browsertest.Run(b, chromedp.Text(chromedp.ID("seed"))) != seed {
		t.Fatalf("the same seed %s gave %s, then %s", seed, first, again)
	}

	// Groups, then one click to a group's messages.
	b.Do(chromedp.Navigate(e.srv.URL+"/groups?status=quarantined"), chromedp.WaitVisible(chromedp.ID("groups")))
	b.Screenshot("groups")
	b.Do(chromedp.Click(chromedp.CSS(`tr[data-fingerprint="`+timeout.Fingerprint+`"] a.group-link`)), chromedp.WaitVisible(chromedp.ID("messages")))
	ids := browsertest.Run(b, chromedp.Evaluate[string](`[...document.querySelectorAll("#messages tbody tr")].map(r => r.dataset.id).join()`))
	if ids != timeout.ID {
		t.Fatalf("the group's messages are %q, want %s", ids, timeout.ID)
	}
	if fp := browsertest.Run(b, chromedp.Evaluate[string](`document.getElementById("fingerprint").value`)); fp != timeout.Fingerprint {
		t.Fatalf("the filter bar shows fingerprint %q", fp)
	}
	b.NoInjection("/groups")
	b.NoConsole()
}

// Hostile strings in a job, queue, reason, header, payload, edit reason,
// actor, replay reason and discard reason are text on the groups page
// and the message's timeline: nothing runs, no element is injected.
func TestUIBrowserHostileGroupsAndTimeline(t *testing.T) {
	b := browsertest.New(t)
	axe := browsertest.Axe(t)
	e := newEnv(t)
	ctx := context.Background()
	secret := e.token("admin", quarantine.RoleAdmin)
	hostile := []string{
		`<script>window.pwned=1</script>`,
		`"><img src=x onerror="window.pwned=2">`,
		`<a href="javascript:window.pwned=3">click</a>`,
		`<svg onload="window.pwned=4"><circle/></svg>`,
		`&lt;b&gt; &amp;amp; &#x3C;i&#x3E;`,
	}
	all := strings.Join(hostile, " ")
	m := e.message(quarantine.Message{
		Queue:          `<script>window.pwned=5</script>`,
		JobName:        `"><svg onload="window.pwned=6">`,
		Reason:         all,
		IdempotencyKey: "k-hostile",
		Headers:        map[string]string{"x-evil": `<img src=x onerror="window.pwned=7">`, "x-link": `javascript:window.pwned=8`},
		Payload:        []byte(`{"html":"<script>window.pwned=9</script>","svg":"<svg onload=window.pwned=10>"}`),
	})
	edited, err := e.store.EditPayload(ctx, quarantine.PayloadEdit{MessageID: m.ID, IfMatch: m.PayloadSHA256,
		Payload: []byte(`{"html":"<img src=x onerror=window.pwned=11>"}`), Reason: all, Actor: `token:"><img src=x onerror=window.pwned=12>`})
	if err != nil {
		t.Fatal(err)
	}
	batch := e.replayed(m, all)
	refail := e.message(quarantine.Message{Queue: m.Queue, JobName: m.JobName, IdempotencyKey: "k-hostile", Reason: all, Payload: []byte(`{}`)})
	if refail.RefailOf != m.ID {
		t.Fatalf("re-failure links %q", refail.RefailOf)
	}

	b.Do(chromedp.Navigate(e.srv.URL+"/?token="+url.QueryEscape(secret)), chromedp.WaitVisible(chromedp.ID("logout")))
	b.Do(chromedp.Navigate(e.srv.URL+"/messages"), chromedp.WaitVisible(chromedp.ID("messages")))
	b.NoInjection("/messages")

	// Groups: the job, the (normalised) reason and the queue are text.
	b.Do(chromedp.Navigate(e.srv.URL+"/groups"), chromedp.WaitVisible(chromedp.ID("groups")))
	groups := browsertest.Run(b, chromedp.Text(chromedp.ID("groups")))
	for _, want := range []string{m.JobName, m.Queue, `<script>`, `javascript:`} {
		if !strings.Contains(groups, want) {
			t.Fatalf("the groups page lacks %q as text: %s", want, groups)
		}
	}
	b.NoInjection("/groups")
	b.Screenshot("groups-hostile")

	// The timeline: the edit's reason and actor, the replay's reason, the
	// re-failure link, then a discard with a hostile reason from the form.
	b.Do(chromedp.Navigate(e.srv.URL+"/messages/"+m.ID), chromedp.WaitVisible(chromedp.ID("timeline")))
	tl := browsertest.Run(b, chromedp.Text(chromedp.ID("timeline")))
	for _, want := range []string{all, `token:"><img src=x onerror=window.pwned=12>`, m.PayloadSHA256, edited.PayloadSHA256, batch.ID, "refailed", refail.ID} {
		if !strings.Contains(tl, want) {
			t.Fatalf("the timeline lacks %q as text:\n%s", want, tl)
		}
	}
	for id, want := range map[string]string{"reason": all, "queue": m.Queue, "job": m.JobName} {
		if got := browsertest.Run(b, chromedp.Text(chromedp.ID(id))); got != want {
			t.Fatalf("#%s shows %q, want the text %q", id, got, want)
		}
	}
	if got := browsertest.Run(b, chromedp.Text(chromedp.ID("headers"))); !strings.Contains(got, m.Headers["x-evil"]) || !strings.Contains(got, m.Headers["x-link"]) {
		t.Fatalf("headers: %q", got)
	}
	if got := browsertest.Run(b, chromedp.Text(chromedp.ID("payload"))); !strings.Contains(got, `<img src=x onerror=window.pwned=11>`) {
		t.Fatalf("payload: %q", got)
	}
	b.NoInjection("/messages/{id}")
	b.Screenshot("message-timeline")
	b.AxeClean(axe, "/messages/{id} with a timeline")

	// The re-failure's page: discard it with a hostile reason; the
	// timeline shows the discard as text, and links back.
	b.Do(chromedp.Navigate(e.srv.URL+"/messages/"+refail.ID), chromedp.WaitVisible(chromedp.ID("discard-form")))
	if href := browsertest.Run(b, chromedp.Evaluate[string](`document.getElementById("refail-of").getAttribute("href")`)); href != "/messages/"+m.ID {
		t.Fatalf("re-failure links to %q", href)
	}
	b.Do(chromedp.SendKeys(chromedp.ID("discard-reason"), all), chromedp.Click(chromedp.ID("discard")),
		chromedp.WaitVisible(chromedp.CSS(`li[data-kind="discard"]`)))
	if got := browsertest.Run(b, chromedp.Text(chromedp.CSS(`li[data-kind="discard"] .ev-reason`))); got != all {
		t.Fatalf("the discard's reason shows %q, want the text %q", got, all)
	}
	b.NoInjection("/messages/{refail}")
	b.Screenshot("message-discarded")
	b.NoConsole()
}

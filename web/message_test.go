package web_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/web"
)

// replayed replays m through the store as an engine would: a batch by
// actor, its item leased and published.
func (e *env) replayed(m *quarantine.Message, reason string) *quarantine.ReplayBatch {
	e.t.Helper()
	ctx := context.Background()
	b, err := e.store.CreateReplay(ctx, quarantine.ReplayRequest{IDs: []string{m.ID}, Rate: 10, Reason: reason, Actor: "token:op"}, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	ls, err := e.store.LeaseReplayItems(ctx, b.ID, "engine", 10, time.Minute, 0)
	if err != nil || len(ls) != 1 {
		e.t.Fatalf("lease: %v %v", ls, err)
	}
	l := ls[0]
	if _, err := e.store.RecordReplayResults(ctx, []quarantine.ReplayResult{{BatchID: b.ID, MessageID: m.ID, Fence: l.Fence,
		Outcome: quarantine.ItemPublished, Destination: "memory:test/" + m.Queue, PayloadVersion: l.Message.PayloadVersion,
		PayloadSHA256: l.Message.PayloadSHA256, At: time.Now()}}); err != nil {
		e.t.Fatal(err)
	}
	return b
}

// The timeline shows the collection, each edit with its old and new
// SHA-256, actor and reason, each replay with its outcome, the re-failure
// linked both ways, and the discard.
func TestWebMessageTimeline(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	m := e.message(quarantine.Message{Queue: "orders", JobName: "charge", IdempotencyKey: "order:1", Payload: []byte(`{"n":1}`), Reason: "boom"})
	edited, err := e.store.EditPayload(ctx, quarantine.PayloadEdit{MessageID: m.ID, IfMatch: m.PayloadSHA256, Payload: []byte(`{"n":2}`),
		Reason: "fix the amount", Actor: "token:alice"})
	if err != nil {
		t.Fatal(err)
	}
	batch := e.replayed(m, "fix deployed")
	refail := e.message(quarantine.Message{Queue: "orders", JobName: "charge", IdempotencyKey: "order:1", Payload: []byte(`{"n":2}`), Reason: "boom again"})
	if refail.RefailOf != m.ID {
		t.Fatalf("re-failure links %q", refail.RefailOf)
	}
	c := e.client()
	e.login(c, e.token("op", quarantine.RoleOperator))
	res, body := get(t, c, e.srv.URL+"/messages/"+m.ID)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("message: %d", res.StatusCode)
	}
	tl := body[strings.Index(body, `id="timeline"`):strings.Index(body, "<h2>Headers")]
	for _, want := range []string{`data-kind="collected"`, `data-kind="edit"`, "version 2", "token:alice", "fix the amount",
		`<code class="old-sha">` + m.PayloadSHA256 + `</code>`, `<code class="new-sha">` + edited.PayloadSHA256 + `</code>`,
		`data-kind="replay"`, `href="/replays/` + batch.ID + `"`, "fix deployed", `outcome-refailed`, "memory:test/orders",
		`re-failed as <a href="/messages/` + refail.ID + `"`} {
		if !strings.Contains(tl, want) {
			t.Errorf("the timeline lacks %s:\n%s", want, tl)
		}
	}
	// In order: collected, edit, replay.
	if i, j, k := strings.Index(tl, `data-kind="collected"`), strings.Index(tl, `data-kind="edit"`), strings.Index(tl, `data-kind="replay"`); !(i < j && j < k) {
		t.Errorf("timeline out of order: %d %d %d", i, j, k)
	}
	// The re-failure links back.
	_, body = get(t, c, e.srv.URL+"/messages/"+refail.ID)
	if !strings.Contains(body, `<a href="/messages/`+m.ID+`" id="refail-of">`) || !strings.Contains(body, `data-kind="refail_of"`) {
		t.Errorf("the re-failure does not link to %s: %s", m.ID, body)
	}
	// A discard joins the timeline.
	_, body = get(t, c, e.srv.URL+"/messages/"+refail.ID)
	res, _ = postForm(t, c, e.srv.URL+"/messages/"+refail.ID+"/discard", url.Values{"csrf": {csrf(t, body)}, "reason": {"known bad"}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/messages/"+refail.ID {
		t.Fatalf("discard: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	_, body = get(t, c, e.srv.URL+"/messages/"+refail.ID)
	if !strings.Contains(body, `data-kind="discard"`) || !strings.Contains(body, "known bad") || !strings.Contains(body, `id="status" class="status status-discarded"`) {
		t.Errorf("no discard in the timeline: %s", body)
	}
}

// Actions follow the role: a viewer is shown none and its POST is
// refused (403, audited); an operator discards with a reason; the page
// links to the editor and the replay form; the curl never holds the
// token.
func TestWebMessageActionsByRole(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.message(quarantine.Message{Queue: "orders", Payload: []byte(`{}`)})
	viewerSecret := e.token("viewer", quarantine.RoleViewer)
	opSecret := e.token("op", quarantine.RoleOperator)
	viewer, op := e.client(), e.client()
	e.login(viewer, viewerSecret)
	e.login(op, opSecret)

	_, body := get(t, viewer, e.srv.URL+"/messages/"+m.ID)
	for _, bad := range []string{`id="discard-form"`, `/edit"`, `/replays/new`} {
		if strings.Contains(body, bad) {
			t.Errorf("a viewer is shown %s", bad)
		}
	}
	if !strings.Contains(html.UnescapeString(body), `curl -H "Authorization: Bearer $QUARANTINE_TOKEN" '`+e.srv.URL+`/api/v1/messages/`+m.ID+`'`) ||
		strings.Contains(body, viewerSecret) {
		t.Errorf("curl: %s", body)
	}
	res, _ := postForm(t, viewer, e.srv.URL+"/messages/"+m.ID+"/discard", url.Values{"csrf": {csrf(t, body)}, "reason": {"x"}})
	if res.StatusCode != http.StatusForbidden || e.statusOf(m.ID) != quarantine.StatusQuarantined {
		t.Fatalf("viewer discard: %d", res.StatusCode)
	}
	if d := e.audit(quarantine.ActionAccessDenied); len(d) != 1 || d[0].Subject != m.ID || d[0].Actor != "token:viewer" {
		t.Fatalf("the viewer's refusal is audited: %+v", d)
	}

	_, body = get(t, op, e.srv.URL+"/messages/"+m.ID)
	for _, want := range []string{`id="discard-form"`, `href="/messages/` + m.ID + `/edit"`, `href="/replays/new?ids=` + m.ID + `"`, `name="reason" required`} {
		if !strings.Contains(body, want) {
			t.Errorf("an operator is not shown %s", want)
		}
	}
	tok := csrf(t, body)
	for _, c := range []struct {
		name string
		form url.Values
		hdr  []string
		want int
	}{
		{"no csrf", url.Values{"reason": {"x"}}, nil, http.StatusForbidden},
		{"another origin", url.Values{"csrf": {tok}, "reason": {"x"}}, []string{"Origin", "http://evil.example"}, http.StatusForbidden},
		{"no reason", url.Values{"csrf": {tok}}, nil, http.StatusUnprocessableEntity},
	} {
		if res, _ := postForm(t, op, e.srv.URL+"/messages/"+m.ID+"/discard", c.form, c.hdr...); res.StatusCode != c.want {
			t.Errorf("%s: %d, want %d", c.name, res.StatusCode, c.want)
		}
	}
	if e.statusOf(m.ID) != quarantine.StatusQuarantined {
		t.Fatal("a refused discard changed the message")
	}
	res, _ = postForm(t, op, e.srv.URL+"/messages/"+m.ID+"/discard", url.Values{"csrf": {tok}, "reason": {"dup"}})
	if res.StatusCode != http.StatusSeeOther || e.statusOf(m.ID) != quarantine.StatusDiscarded {
		t.Fatalf("discard: %d", res.StatusCode)
	}
	// Discarded: no discard, edit or replay offered; a second discard is 409.
	_, body = get(t, op, e.srv.URL+"/messages/"+m.ID)
	if strings.Contains(body, `id="discard-form"`) || strings.Contains(body, `/replays/new`) {
		t.Error("a discarded message offers actions")
	}
	res, body = postForm(t, op, e.srv.URL+"/messages/"+m.ID+"/discard", url.Values{"csrf": {tok}, "reason": {"again"}})
	if res.StatusCode != http.StatusConflict || !strings.Contains(body, "not discarded") {
		t.Fatalf("second discard: %d", res.StatusCode)
	}
}

// Another team's message is not found, and a POST on it is refused and
// audited.
func TestWebMessageScoped(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	theirs := e.message(quarantine.Message{Queue: "orders", Owner: "team-b", Payload: []byte(`{}`)})
	c := e.client()
	e.login(c, e.token("a-op", quarantine.RoleOperator, "team-a"))
	res, body := get(t, c, e.srv.URL+"/messages/"+theirs.ID)
	if res.StatusCode != http.StatusNotFound {
		t.Fatalf("another team's message: %d", res.StatusCode)
	}
	res, _ = postForm(t, c, e.srv.URL+"/messages/"+theirs.ID+"/discard", url.Values{"csrf": {csrf(t, body)}, "reason": {"x"}})
	if res.StatusCode != http.StatusNotFound || e.statusOf(theirs.ID) != quarantine.StatusQuarantined {
		t.Fatalf("discard of another team's message: %d", res.StatusCode)
	}
	if d := e.audit(quarantine.ActionAccessDenied); len(d) != 1 || d[0].Subject != theirs.ID {
		t.Fatalf("audit: %+v", d)
	}
}

// Viewers see the payload masked at the redaction pointers (as the API
// shows it), the headers as stored (redact.headers masked them at
// ingest); operators see it all.
func TestWebMessageViewerSeesMaskedPayload(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *web.Config) { c.RedactPointers = []string{"/card/number", "/items/1"} })
	m := e.message(quarantine.Message{Queue: "billing", Payload: []byte(`{"card":{"number":"4111111111111111","cvc":"999"},"items":["a","secret-b"]}`),
		Headers: map[string]string{"authorization": "<redacted>", "x-trace": "t-1"}})
	viewer, op := e.client(), e.client()
	e.login(viewer, e.token("viewer", quarantine.RoleViewer))
	e.login(op, e.token("op", quarantine.RoleOperator))
	_, body := get(t, viewer, e.srv.URL+"/messages/"+m.ID)
	shown := html.UnescapeString(body)
	for _, want := range []string{`"number": "<redacted>"`, `"cvc": "999"`, `"<redacted>"`, `id="payload-masked"`, "x-trace", "t-1"} {
		if !strings.Contains(shown, want) {
			t.Errorf("viewer page lacks %s", want)
		}
	}
	if strings.Contains(shown, "4111111111111111") || strings.Contains(shown, "secret-b") {
		t.Fatal("a viewer sees a redacted value")
	}
	_, body = get(t, op, e.srv.URL+"/messages/"+m.ID)
	if shown := html.UnescapeString(body); !strings.Contains(shown, "4111111111111111") || strings.Contains(shown, `id="payload-masked"`) {
		t.Fatal("an operator sees the payload unmasked")
	}
	// A viewer's text search is refused, on every page that takes q, and audited.
	for _, p := range []string{"/messages?q=4111", "/groups?q=4111", "/messages/sample?q=4111", "/messages/bulk?all=1&q=4111"} {
		if res, _ := get(t, viewer, e.srv.URL+p); res.StatusCode != http.StatusForbidden {
			t.Errorf("viewer %s: %d, want 403", p, res.StatusCode)
		}
		if res, _ := get(t, op, e.srv.URL+p); res.StatusCode != http.StatusOK {
			t.Errorf("operator %s: %d, want 200", p, res.StatusCode)
		}
	}
	if n := len(e.audit(quarantine.ActionAccessDenied)); n != 4 {
		t.Fatalf("%d refusals audited, want 4", n)
	}
}

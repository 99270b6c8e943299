package web_test

import (
	"context"
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
	"github.com/quarantine-dev/quarantine/internal/rules"
	"github.com/quarantine-dev/quarantine/web"
)

// editEnv is the UI with a JSON Schema for job "charge" (amount: a
// number, required) and an idempotency rule reading /order_id in queue
// "orders"; an operator is logged in.
type editEnv struct {
	*env
	c      *http.Client
	m      *quarantine.Message
	secret string
}

func newEditEnv(t *testing.T) *editEnv {
	t.Helper()
	dir := t.TempDir()
	schema := filepath.Join(dir, "charge.json")
	if err := os.WriteFile(schema, []byte(`{"type":"object","required":["amount"],"properties":{"amount":{"type":"number"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	sch, err := rules.CompileSchema(schema)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(c *web.Config) {
		c.Edit = rules.EditRules{Schemas: map[string]*rules.Schema{"charge": sch},
			Preparer: &collect.Preparer{Idempotency: []collect.IdempotencyRule{{Queues: []string{"orders"}, JSONPointer: "/order_id"}}}}
	})
	ee := &editEnv{env: e, c: e.client(), secret: e.token("op", quarantine.RoleOperator)}
	ee.m = e.message(quarantine.Message{Queue: "orders", JobName: "charge", IdempotencyKey: "42",
		Payload: []byte(`{"order_id":"42","amount":"12.50"}`), Reason: "amount is a string"})
	e.login(ee.c, ee.secret)
	return ee
}

// form opens the editor and returns its CSRF token and If-Match.
func (e *editEnv) form() (csrfTok, ifMatch string) {
	e.t.Helper()
	res, body := get(e.t, e.c, e.srv.URL+"/messages/"+e.m.ID+"/edit")
	if res.StatusCode != http.StatusOK {
		e.t.Fatalf("GET edit: %d\n%s", res.StatusCode, body)
	}
	m := regexp.MustCompile(`name="if_match" id="if-match" value="([0-9a-f]{64})"`).FindStringSubmatch(body)
	if m == nil {
		e.t.Fatalf("no if_match in %s", body)
	}
	return csrf(e.t, body), m[1]
}

func (e *editEnv) post(v url.Values, header ...string) (*http.Response, string) {
	e.t.Helper()
	return postForm(e.t, e.c, e.srv.URL+"/messages/"+e.m.ID+"/edit", v, header...)
}

func (e *editEnv) stored() *quarantine.Message {
	e.t.Helper()
	m, err := e.store.GetMessage(context.Background(), e.m.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

func (e *editEnv) audits(action string) []quarantine.AuditEvent {
	e.t.Helper()
	evs, err := e.store.ListAudit(context.Background(), quarantine.AuditFilter{Action: action, Limit: 100})
	if err != nil {
		e.t.Fatal(err)
	}
	return evs
}

// The editor shows the payload indented; a save with a reason stores a
// new version, compact like the one before, audited with the reason and
// both hashes, and redirects to the message, which confirms the save.
func TestEditSaves(t *testing.T) {
	t.Parallel()
	e := newEditEnv(t)
	res, body := get(t, e.c, e.srv.URL+"/messages/"+e.m.ID+"/edit")
	if res.StatusCode != http.StatusOK || !strings.Contains(body, html.EscapeString("\"amount\": \"12.50\"")) {
		t.Fatalf("GET edit: %d, the payload indented is missing:\n%s", res.StatusCode, body)
	}
	tok, ifMatch := e.form()
	res, _ = e.post(url.Values{"csrf": {tok}, "if_match": {ifMatch}, "action": {"save"}, "reason": {"amount as a number"},
		"payload": {"{\r\n  \"order_id\": \"42\",\r\n  \"amount\": 12.5\r\n}"}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/messages/"+e.m.ID+"?saved=2" {
		t.Fatalf("save: %d to %q", res.StatusCode, res.Header.Get("Location"))
	}
	// The message confirms the version saved, and only while it is the
	// current one.
	if _, body := get(t, e.c, e.srv.URL+res.Header.Get("Location")); !strings.Contains(body, `<p class="flash" role="status" id="flash">Saved: the payload is now version 2`) {
		t.Fatalf("no confirmation of the save:\n%s", body)
	}
	if _, body := get(t, e.c, e.srv.URL+"/messages/"+e.m.ID+"?saved=1"); strings.Contains(body, `id="flash"`) {
		t.Fatalf("a save of a version that is not the current one is confirmed:\n%s", body)
	}
	m := e.stored()
	if m.PayloadVersion != 2 || string(m.Payload) != `{"order_id":"42","amount":12.5}` {
		t.Fatalf("stored version %d payload %s", m.PayloadVersion, m.Payload)
	}
	evs := e.audits(quarantine.ActionEdit)
	if len(evs) != 1 || evs[0].Subject != e.m.ID || evs[0].Actor != "token:op" {
		t.Fatalf("audit: %+v", evs)
	}
	var d map[string]any
	_ = json.Unmarshal(evs[0].Details, &d)
	if d["reason"] != "amount as a number" || !strings.Contains(string(evs[0].Details), ifMatch) || !strings.Contains(string(evs[0].Details), m.PayloadSHA256) {
		t.Fatalf("audit details %s: want the reason and both hashes", evs[0].Details)
	}
}

// Every refusal leaves the payload as it was and says why next to the
// field: not JSON (with its line), no reason, a JSON Schema violation
// (with its pointer), a changed idempotency key, no change at all.
func TestEditRefusals(t *testing.T) {
	t.Parallel()
	e := newEditEnv(t)
	for _, c := range []struct {
		name, payload, reason string
		want                  []string
	}{
		{"not JSON", "{\n  \"order_id\": \"42\",\n  \"amount\": \n}", "fix", []string{`id="payload-error"`, "This is not JSON: line 4", `aria-invalid="true"`}},
		{"no reason", `{"order_id":"42","amount":12.5}`, "  ", []string{`id="reason-error"`, "a reason is required"}},
		{"schema", `{"order_id":"42","amount":"twelve"}`, "fix", []string{`id="violations"`, "<code>/amount</code>", "JSON Schema"}},
		{"schema required", `{"order_id":"42"}`, "fix", []string{`id="violations"`, "amount"}},
		{"key", `{"order_id":"43","amount":12.5}`, "fix", []string{`id="payload-error"`, "idempotency key"}},
		{"no change", "{\n  \"order_id\": \"42\",\n  \"amount\": \"12.50\"\n}", "fix", []string{`id="payload-error"`, `id="diff-none"`}},
	} {
		tok, ifMatch := e.form()
		for _, action := range []string{"save", "preview"} {
			res, body := e.post(url.Values{"csrf": {tok}, "if_match": {ifMatch}, "action": {action}, "reason": {c.reason}, "payload": {c.payload}})
			if res.StatusCode != http.StatusUnprocessableEntity {
				t.Fatalf("%s (%s): %d, want 422\n%s", c.name, action, res.StatusCode, body)
			}
			for _, w := range c.want {
				if !strings.Contains(body, w) {
					t.Fatalf("%s (%s): the page lacks %q:\n%s", c.name, action, w, body)
				}
			}
			if !strings.Contains(body, html.EscapeString(c.payload)) && c.name != "no reason" {
				t.Fatalf("%s: the editor lost the text", c.name)
			}
		}
	}
	if m := e.stored(); m.PayloadVersion != 1 {
		t.Fatalf("a refused edit was stored: version %d", m.PayloadVersion)
	}
	if evs := e.audits(quarantine.ActionEdit); len(evs) != 0 {
		t.Fatalf("refused edits audited as edits: %+v", evs)
	}
}

// Preview checks the edit and shows its changes by JSON Pointer (and its
// line diff) without saving; a compacted payload has no change.
func TestEditPreviewShowsTheDiff(t *testing.T) {
	t.Parallel()
	e := newEditEnv(t)
	tok, ifMatch := e.form()
	res, body := e.post(url.Values{"csrf": {tok}, "if_match": {ifMatch}, "action": {"preview"}, "reason": {"fix"},
		"payload": {"{\n  \"order_id\": \"42\",\n  \"amount\": 12.5\n}"}})
	if res.StatusCode != http.StatusOK {
		t.Fatalf("preview: %d\n%s", res.StatusCode, body)
	}
	del := regexp.MustCompile(`<li class="diff-del">.*?<span class="diff-text">\s*&#34;amount&#34;: &#34;12.50&#34;</span>`)
	add := regexp.MustCompile(`<li class="diff-add">.*?<span class="diff-text">\s*&#34;amount&#34;: 12.5</span>`)
	same := regexp.MustCompile(`<li class="diff-same">.*?<span class="diff-text">\s*&#34;order_id&#34;: &#34;42&#34;,</span>`)
	for _, re := range []*regexp.Regexp{del, add, same} {
		if !re.MatchString(body) {
			t.Fatalf("the diff lacks %s:\n%s", re, body)
		}
	}
	changes := regexp.MustCompile(`<tr class="change-(\w+)"><td><code class="pointer">([^<]*)</code>`).FindAllStringSubmatch(body, -1)
	if len(changes) != 1 || changes[0][1] != "change" || changes[0][2] != "/amount" ||
		!strings.Contains(body, `<code class="value">&#34;12.50&#34;</code></td><td><code class="value">12.5</code>`) {
		t.Fatalf("the changes by pointer are %v, want /amount changed from \"12.50\" to 12.5:\n%s", changes, body)
	}
	if !strings.Contains(body, "Why it failed") || !strings.Contains(body, html.EscapeString(e.m.Reason)) {
		t.Fatalf("the editor does not show the failure reason:\n%s", body)
	}
	// The same payload compacted, its members in another order: no change.
	_, body = e.post(url.Values{"csrf": {tok}, "if_match": {ifMatch}, "action": {"preview"}, "reason": {"fix"},
		"payload": {`{"amount":"12.50","order_id":"42"}`}})
	if !strings.Contains(body, `id="diff-none"`) || strings.Contains(body, `<tr class="change-`) {
		t.Fatalf("a compacted, reordered payload shows changes:\n%s", body)
	}
	if m := e.stored(); m.PayloadVersion != 1 {
		t.Fatalf("a preview was stored: version %d", m.PayloadVersion)
	}
}

// An edit based on a version that is no longer current is refused; the
// page shows the newer version and bases the next save on it.
func TestEditStale(t *testing.T) {
	t.Parallel()
	e := newEditEnv(t)
	tok, ifMatch := e.form()
	// Someone else edits first.
	other, err := e.store.EditPayload(context.Background(), quarantine.PayloadEdit{MessageID: e.m.ID, IfMatch: ifMatch,
		Payload: []byte(`{"order_id":"42","amount":13}`), Reason: "someone else", Actor: "token:other"})
	if err != nil {
		t.Fatal(err)
	}
	mine := "{\n  \"order_id\": \"42\",\n  \"amount\": 12.5\n}"
	res, body := e.post(url.Values{"csrf": {tok}, "if_match": {ifMatch}, "action": {"save"}, "reason": {"mine"}, "payload": {mine}})
	if res.StatusCode != http.StatusConflict {
		t.Fatalf("stale save: %d, want 409\n%s", res.StatusCode, body)
	}
	for _, w := range []string{"changed since you opened the editor", "version 2", html.EscapeString("\"amount\": 13"),
		`id="if-match" value="` + other.PayloadSHA256 + `"`, html.EscapeString(mine)} {
		if !strings.Contains(body, w) {
			t.Fatalf("the stale page lacks %q:\n%s", w, body)
		}
	}
	if m := e.stored(); m.PayloadVersion != 2 || string(m.Payload) != `{"order_id":"42","amount":13}` {
		t.Fatalf("the stale edit overwrote: version %d %s", m.PayloadVersion, m.Payload)
	}
	// Saving again, now knowingly based on version 2, works.
	res, _ = e.post(url.Values{"csrf": {tok}, "if_match": {other.PayloadSHA256}, "action": {"save"}, "reason": {"mine"}, "payload": {mine}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("save on the newer version: %d", res.StatusCode)
	}
	if m := e.stored(); m.PayloadVersion != 3 {
		t.Fatalf("version %d, want 3", m.PayloadVersion)
	}
}

// A viewer has no editor: GET and POST are 403 and audited; a token of
// other owners finds no message; a POST without the CSRF token or from
// another site is refused. Nothing is stored.
func TestEditRefusedToViewersForeignersAndForgeries(t *testing.T) {
	t.Parallel()
	e := newEditEnv(t)
	tok, ifMatch := e.form()
	good := url.Values{"csrf": {tok}, "if_match": {ifMatch}, "action": {"save"}, "reason": {"x"}, "payload": {`{"order_id":"42","amount":1}`}}

	for _, c := range []struct {
		name   string
		v      url.Values
		header []string
	}{
		{"no csrf", url.Values{"if_match": {ifMatch}, "action": {"save"}, "reason": {"x"}, "payload": {`{"order_id":"42","amount":1}`}}, nil},
		{"wrong csrf", func() url.Values { v := url.Values{}; v.Set("csrf", "nope"); return v }(), nil},
		{"other origin", good, []string{"Origin", "http://evil.example"}},
		{"cross-site fetch", good, []string{"Sec-Fetch-Site", "cross-site"}},
	} {
		if res, _ := e.post(c.v, c.header...); res.StatusCode != http.StatusForbidden {
			t.Fatalf("%s: %d, want 403", c.name, res.StatusCode)
		}
	}

	viewer := e.client()
	e.login(viewer, e.token("viewer", quarantine.RoleViewer))
	if res, _ := get(t, viewer, e.srv.URL+"/messages/"+e.m.ID+"/edit"); res.StatusCode != http.StatusForbidden {
		t.Fatalf("viewer GET edit: %d, want 403", res.StatusCode)
	}
	_, page := get(t, viewer, e.srv.URL+"/messages")
	v := url.Values{"csrf": {csrf(t, page)}, "if_match": {ifMatch}, "action": {"save"}, "reason": {"x"}, "payload": {`{"order_id":"42","amount":1}`}}
	if res, _ := postForm(t, viewer, e.srv.URL+"/messages/"+e.m.ID+"/edit", v); res.StatusCode != http.StatusForbidden {
		t.Fatalf("viewer POST edit: %d, want 403", res.StatusCode)
	}

	other := e.client()
	e.login(other, e.token("other-team", quarantine.RoleOperator, "team-b"))
	_, page = get(t, other, e.srv.URL+"/messages")
	v.Set("csrf", csrf(t, page))
	if res, _ := postForm(t, other, e.srv.URL+"/messages/"+e.m.ID+"/edit", v); res.StatusCode != http.StatusNotFound {
		t.Fatalf("other owner's POST edit: %d, want 404", res.StatusCode)
	}

	if m := e.stored(); m.PayloadVersion != 1 {
		t.Fatalf("a refused edit was stored: version %d", m.PayloadVersion)
	}
	denied := e.audits(quarantine.ActionAccessDenied)
	var viewerDenials, foreignDenials int
	for _, ev := range denied {
		switch {
		case ev.Actor == "token:viewer" && ev.Subject == e.m.ID:
			viewerDenials++
		case ev.Actor == "token:other-team" && ev.Subject == e.m.ID:
			foreignDenials++
		}
	}
	if viewerDenials != 2 || foreignDenials != 1 {
		t.Fatalf("access.denied: %d of the viewer (want 2), %d of the other team (want 1): %+v", viewerDenials, foreignDenials, denied)
	}
}

// Hostile strings in the payload, job and reason are text on the editor.
func TestEditHostileAsText(t *testing.T) {
	t.Parallel()
	e := newEditEnv(t)
	m := e.message(quarantine.Message{Queue: "q", JobName: `"><svg onload=alert(1)>`, ContentType: "text/html",
		Payload: []byte(`</textarea><script>alert(1)</script><img src=x onerror=alert(2)>`)})
	res, body := get(t, e.c, e.srv.URL+"/messages/"+m.ID+"/edit")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("%d", res.StatusCode)
	}
	for _, bad := range []string{"<script>alert", "<img src=x", "<svg onload", "</textarea><script>"} {
		if strings.Contains(body, bad) {
			t.Fatalf("the page holds %q unescaped:\n%s", bad, body)
		}
	}
	if !strings.Contains(body, "&lt;/textarea&gt;&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Fatalf("the payload is not shown escaped:\n%s", body)
	}
}

// The editor's form is not held to the small forms' cap: a payload of
// 200 KB saves.
func TestEditLargePayload(t *testing.T) {
	t.Parallel()
	e := newEditEnv(t)
	tok, ifMatch := e.form()
	big := `{"order_id":"42","amount":1,"notes":"` + strings.Repeat("x", 200<<10) + `"}`
	res, body := e.post(url.Values{"csrf": {tok}, "if_match": {ifMatch}, "action": {"save"}, "reason": {"big"}, "payload": {big}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("save of 200 KB: %d\n%.500s", res.StatusCode, body)
	}
	if m := e.stored(); m.PayloadVersion != 2 || len(m.Payload) != len(big) {
		t.Fatalf("stored version %d of %d bytes", m.PayloadVersion, len(m.Payload))
	}
}

package web_test

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/rules"
	"github.com/quarantine-dev/quarantine/web"
)

// Above the threshold the operator types the count; a discard too large
// to wait for leads to its progress page, which reloads itself while it
// runs and shows the counts once it is over.
func TestWebBulkDiscardConfirmAndProgress(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *web.Config) {
		c.Discards = rules.NewDiscards(c.Store, rules.DiscardConfig{ConfirmAbove: 3, SyncMax: 2, Chunk: 2}, c.Logger)
	})
	for range 6 {
		e.message(quarantine.Message{Queue: "orders", Payload: []byte(`{}`)})
	}
	c := e.client()
	e.login(c, e.token("op", quarantine.RoleOperator))
	status, body := bulkPage(t, e, c, "all=1&queue=orders")
	if status != http.StatusOK || pageCount(t, body) != 6 || !strings.Contains(body, `<input id="expect_count" name="expect_count" required`) ||
		strings.Contains(body, `name="expect_count" value="6"`) {
		t.Fatalf("above the threshold the count is typed, not pinned: %d %s", status, body)
	}
	form := url.Values{"csrf": {csrf(t, body)}, "all": {"1"}, "queue": {"orders"}, "reason": {"incident"}}
	if res, _ := postForm(t, c, e.srv.URL+"/messages/discard", form); res.StatusCode != http.StatusBadRequest {
		t.Fatalf("without the typed count: %d, want 400", res.StatusCode)
	}
	form.Set("expect_count", "5")
	if res, _ := postForm(t, c, e.srv.URL+"/messages/discard", form); res.StatusCode != http.StatusConflict {
		t.Fatalf("a mistyped count: %d, want 409", res.StatusCode)
	}
	if n := len(e.audit(quarantine.ActionDiscard)); n != 0 {
		t.Fatalf("%d discarded by refused forms", n)
	}
	form.Set("expect_count", "6")
	res, _ := postForm(t, c, e.srv.URL+"/messages/discard", form)
	loc := res.Header.Get("Location")
	if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/discards/") {
		t.Fatalf("a large discard: %d to %q, want 303 to its progress page", res.StatusCode, loc)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, body = get(t, c, e.srv.URL+loc)
		if res.StatusCode != http.StatusOK || !strings.Contains(body, `<progress id="progress" max="6"`) {
			t.Fatalf("progress page: %d %s", res.StatusCode, body)
		}
		running := strings.Contains(body, `http-equiv="refresh"`)
		if running != strings.Contains(body, "<h1>Discard running</h1>") {
			t.Fatalf("the page reloads itself exactly while the discard runs: %s", body)
		}
		if !running || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond) // the page is what is observed: no event to wait on
	}
	if !strings.Contains(body, "<h1>Discard completed</h1>") || !strings.Contains(body, `<dd id="discarded">6</dd>`) ||
		!strings.Contains(body, `value="6">100%`) {
		t.Fatalf("completed page: %s", body)
	}
	if n := len(e.chunkDiscarded()); n != 6 {
		t.Fatalf("the message.discard events name %d messages, want 6", n)
	}
	// The audit page links the chunks' events to the operation; a
	// discarded message's timeline names it.
	admin := e.client()
	e.login(admin, e.token("adm", quarantine.RoleAdmin))
	if _, page := get(t, admin, e.srv.URL+"/audit?action=message.discard"); !strings.Contains(page, `href="`+loc+`"`) {
		t.Fatalf("the audit page does not link the chunk events to %s: %s", loc, page)
	}
	if _, page := get(t, c, e.srv.URL+"/messages/"+e.chunkDiscarded()[0]); !strings.Contains(page, `class="ev-operation"`) ||
		!strings.Contains(page, `href="`+loc+`"`) {
		t.Fatalf("the timeline of a discarded message does not name its discard %s: %s", loc, page)
	}
	// Another team's operator does not see it.
	other := e.client()
	e.login(other, e.token("b-op", quarantine.RoleOperator, "team-b"))
	if res, _ := get(t, other, e.srv.URL+loc); res.StatusCode != http.StatusNotFound {
		t.Fatalf("another team's progress page: %d, want 404", res.StatusCode)
	}
}

// A failed discard's page offers Resume to an operator (not to a
// viewer); resuming runs it again from its last committed chunk, and the
// page then shows it completed.
func TestWebDiscardResume(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for range 5 {
		e.message(quarantine.Message{Queue: "orders", Payload: []byte(`{}`)})
	}
	ctx := t.Context()
	op, err := e.store.StartDiscard(ctx, quarantine.Discard{Filter: &quarantine.Filter{Queue: []string{"orders"}}, Reason: "incident", Actor: "token:op"}, -1)
	if err != nil {
		t.Fatal(err)
	}
	if op, _, err = e.store.DiscardChunk(ctx, op.ID, 2); err != nil {
		t.Fatal(err)
	}
	if err := e.store.FailDiscard(ctx, op.ID, "disk full"); err != nil {
		t.Fatal(err)
	}
	loc := "/discards/" + op.ID
	viewer := e.client()
	e.login(viewer, e.token("viewer", quarantine.RoleViewer))
	if res, body := get(t, viewer, e.srv.URL+loc); res.StatusCode != http.StatusOK || !strings.Contains(body, `id="failed"`) || strings.Contains(body, `id="resume"`) {
		t.Fatalf("a viewer's page of a failed discard: %d %s", res.StatusCode, body)
	}
	c := e.client()
	e.login(c, e.token("op", quarantine.RoleOperator))
	_, body := get(t, c, e.srv.URL+loc)
	if !strings.Contains(body, `<button id="resume"`) || !strings.Contains(body, `<dd id="discarded">2</dd>`) {
		t.Fatalf("an operator's page of a failed discard: %s", body)
	}
	res, _ := postForm(t, c, e.srv.URL+loc+"/resume", url.Values{"csrf": {csrf(t, body)}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != loc {
		t.Fatalf("resume: %d to %q, want 303 to %s", res.StatusCode, res.Header.Get("Location"), loc)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, body = get(t, c, e.srv.URL+loc)
		if strings.Contains(body, "<h1>Discard completed</h1>") || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond) // the page is what is observed: no event to wait on
	}
	if !strings.Contains(body, "<h1>Discard completed</h1>") || !strings.Contains(body, `<dd id="discarded">5</dd>`) || strings.Contains(body, `id="resume"`) {
		t.Fatalf("resumed discard's page: %s", body)
	}
	if n := len(e.chunkDiscarded()); n != 5 {
		t.Fatalf("the message.discard events name %d messages, want 5", n)
	}
	// Completed: nothing to resume; back to its page, unchanged.
	if res, _ := postForm(t, c, e.srv.URL+loc+"/resume", url.Values{"csrf": {csrf(t, body)}}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("resuming a completed discard: %d, want 303", res.StatusCode)
	}
	if got, err := e.store.GetDiscard(ctx, op.ID); err != nil || got.State != quarantine.DiscardCompleted || got.Discarded != 5 {
		t.Fatalf("a completed discard resumed: %+v, %v", got, err)
	}
}

// chunkDiscarded returns the ids the message.discard events name, all
// chunk events of discard operations (one per chunk), each id once.
func (e *env) chunkDiscarded() []string {
	e.t.Helper()
	var ids []string
	for _, ev := range e.audit(quarantine.ActionDiscard) {
		d, ok := quarantine.ParseDiscardChunk(ev)
		if !ok || d.Check() != nil {
			e.t.Fatalf("not a chunk's discard event: %+v", ev)
		}
		ids = append(ids, d.IDs()...)
	}
	slices.Sort(ids)
	if len(slices.Compact(slices.Clone(ids))) != len(ids) {
		e.t.Fatalf("a message discarded twice: %v", ids)
	}
	return ids
}

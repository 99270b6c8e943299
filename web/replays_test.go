package web_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/rules"
	"github.com/quarantine-dev/quarantine/web"
)

// replayEnv is the UI with replay defaults (rate 5, canary 0, max rate
// 100) and an operator logged in, over three messages of queue orders
// and one of queue billing.
type replayEnv struct {
	*env
	c      *http.Client
	orders []*quarantine.Message
}

func newReplayEnv(t *testing.T) *replayEnv {
	t.Helper()
	e := newEnv(t, func(c *web.Config) {
		c.Replay = rules.ReplayDefaults{Rate: 5, MaxRate: 100, Collectors: []string{"orders-rmq"}}
	})
	re := &replayEnv{env: e, c: e.client()}
	for i := range 3 {
		re.orders = append(re.orders, e.message(quarantine.Message{Queue: "orders", JobName: "charge",
			IdempotencyKey: "k" + string(rune('a'+i)), Payload: []byte(`{"n":1}`), Reason: "declined"}))
	}
	e.message(quarantine.Message{Queue: "billing", JobName: "invoice", IdempotencyKey: "b1", Payload: []byte(`{}`)})
	e.login(re.c, e.token("op", quarantine.RoleOperator))
	return re
}

var expectRE = regexp.MustCompile(`name="expect_count" value="(\d+)"`)

// newForm opens /replays/new?query and returns the page and its form's
// fields (hidden ones included) ready to post.
func (e *replayEnv) newForm(c *http.Client, query string) (string, url.Values) {
	e.t.Helper()
	res, body := get(e.t, c, e.srv.URL+"/replays/new?"+query)
	if res.StatusCode != http.StatusOK {
		e.t.Fatalf("GET /replays/new?%s: %d\n%s", query, res.StatusCode, body)
	}
	v := url.Values{"csrf": {csrf(e.t, body)}, "reason": {"dependency fixed"}, "rate": {"50"}}
	for _, m := range regexp.MustCompile(`<input type="hidden" name="([a-z_]+)" value="([^"]*)">`).FindAllStringSubmatch(body, -1) {
		if m[1] != "csrf" {
			v.Add(m[1], m[2])
		}
	}
	return body, v
}

// dryRun posts the form and returns the draft it created.
func (e *replayEnv) dryRun(v url.Values) *quarantine.ReplayBatch {
	e.t.Helper()
	res, body := postForm(e.t, e.c, e.srv.URL+"/replays", v)
	if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(res.Header.Get("Location"), "/replays/") {
		e.t.Fatalf("POST /replays: %d %q\n%s", res.StatusCode, res.Header.Get("Location"), body)
	}
	b, err := e.store.GetReplay(context.Background(), strings.TrimPrefix(res.Header.Get("Location"), "/replays/"))
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

func (e *replayEnv) replay(id string) *quarantine.ReplayBatch {
	e.t.Helper()
	b, err := e.store.GetReplay(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

// The form shows the count it pins, the dry run pins exactly those
// messages as a draft whose page lists them with the estimated duration;
// a message arriving later is not in it, and Start replays exactly the
// previewed set.
func TestReplayDryRunPinsThePreviewedSet(t *testing.T) {
	t.Parallel()
	e := newReplayEnv(t)
	body, v := e.newForm(e.c, "queue=orders&status=quarantined")
	if !strings.Contains(body, `id="selection-count"><strong>3</strong>`) || v.Get("expect_count") != "3" || v.Get("queue") != "orders" {
		t.Fatalf("the form does not pin 3 messages of orders: %v\n%s", v, body)
	}
	b := e.dryRun(v)
	if b.State != quarantine.ReplayDraft || b.Total != 3 || b.Rate != 50 || b.Reason != "dependency fixed" || b.Actor != "token:op" {
		t.Fatalf("draft: %+v", b)
	}
	res, page := get(t, e.c, e.srv.URL+"/replays/"+b.ID)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET replay: %d", res.StatusCode)
	}
	for _, m := range e.orders {
		if !strings.Contains(page, `<tr data-message="`+m.ID+`">`) {
			t.Fatalf("the preview lacks %s:\n%s", m.ID, page)
		}
	}
	// 3 messages at 50/s: 0.1 s, shown rounded.
	if !strings.Contains(page, `id="replay-estimate">0 s<`) || !strings.Contains(page, `id="start"`) {
		t.Fatalf("the draft page lacks its estimate or its Start button:\n%s", page)
	}
	late := e.message(quarantine.Message{Queue: "orders", JobName: "charge", IdempotencyKey: "late", Payload: []byte(`{}`)})
	res, _ = postForm(t, e.c, e.srv.URL+"/replays/"+b.ID+"/start", url.Values{"csrf": {csrf(t, page)}, "reason": {"go"}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("start: %d", res.StatusCode)
	}
	b = e.replay(b.ID)
	if b.State != quarantine.ReplayRunning || b.Total != 3 {
		t.Fatalf("started: %s with %d items, want running with 3", b.State, b.Total)
	}
	items, _, err := e.store.ListReplayItems(context.Background(), quarantine.ReplayItemFilter{BatchID: b.ID, After: -1, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		if it.MessageID == late.ID {
			t.Fatal("a message that arrived after the preview is in the batch")
		}
	}
}

// A selection by ids counts them; when the selection changed between the
// form and the post, nothing is created and the form shows the new count.
func TestReplayByIDsAndAChangedSelection(t *testing.T) {
	t.Parallel()
	e := newReplayEnv(t)
	body, v := e.newForm(e.c, "ids="+e.orders[0].ID+"&ids="+e.orders[1].ID+"&ids="+e.orders[0].ID)
	if v.Get("expect_count") != "2" || len(v["ids"]) != 2 || !strings.Contains(body, "by id") {
		t.Fatalf("ids form: %v", v)
	}
	if b := e.dryRun(v); b.Total != 2 {
		t.Fatalf("total %d", b.Total)
	}

	_, v = e.newForm(e.c, "queue=orders")
	e.message(quarantine.Message{Queue: "orders", JobName: "charge", IdempotencyKey: "new", Payload: []byte(`{}`)})
	res, page := postForm(t, e.c, e.srv.URL+"/replays", v)
	if res.StatusCode != http.StatusConflict || !strings.Contains(page, "matched 3 messages when the form was shown and matches 4 now") ||
		!strings.Contains(page, `name="expect_count" value="4"`) {
		t.Fatalf("changed selection: %d\n%s", res.StatusCode, page)
	}
	list, _, err := e.store.ListReplays(context.Background(), quarantine.ReplayFilter{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 {
		t.Fatalf("%d batches, want only the first", len(list))
	}
}

// The form's values are checked as the API checks them, each error next
// to its field, and nothing is created.
func TestReplayFormErrors(t *testing.T) {
	t.Parallel()
	e := newReplayEnv(t)
	_, v := e.newForm(e.c, "queue=orders")
	for _, c := range []struct {
		field, value string
		status       int
		want         string
	}{
		{"rate", "fast", http.StatusBadRequest, `id="rate-error">A number, not &#34;fast&#34;.`},
		{"rate", "1000", http.StatusUnprocessableEntity, `id="rate-error">rate 1000 is above the configured maximum of 100 msg/s`},
		{"rate", "-1", http.StatusBadRequest, `id="rate-error">rate must be a positive number`},
		{"observe", "soon", http.StatusBadRequest, `id="observe-error">A duration like 30s`},
		{"halt_refail_ratio", "2", http.StatusBadRequest, `id="halt_refail_ratio-error">halt_refail_ratio must be between 0 and 1`},
		{"canary", "1.5", http.StatusBadRequest, `id="canary-error">A whole number`},
		{"reason", " ", http.StatusUnprocessableEntity, `id="reason-error">a reason is required`},
		{"dest_collector", "nope", http.StatusUnprocessableEntity, `id="dest_collector-error">no collector named &#34;nope&#34; is configured`},
	} {
		w := url.Values{}
		for k, vs := range v {
			w[k] = vs
		}
		w.Set(c.field, c.value)
		res, page := postForm(t, e.c, e.srv.URL+"/replays", w)
		if res.StatusCode != c.status || !strings.Contains(page, c.want) {
			t.Fatalf("%s=%q: %d (want %d), page lacks %q:\n%s", c.field, c.value, res.StatusCode, c.status, c.want, page)
		}
		if !strings.Contains(page, `aria-invalid="true" aria-describedby="`+c.field+`-error"`) {
			t.Fatalf("%s: the field is not marked invalid", c.field)
		}
	}
	if list, _, _ := e.store.ListReplays(context.Background(), quarantine.ReplayFilter{Limit: 10}); len(list) != 0 {
		t.Fatalf("a refused form created %d batches", len(list))
	}
}

// Start (with the reason given on the replay form: it is asked once),
// pause, resume and cancel, each with its reason, audited; a missing
// reason or an action the state does not allow changes nothing.
func TestReplayActions(t *testing.T) {
	t.Parallel()
	e := newReplayEnv(t)
	_, v := e.newForm(e.c, "queue=orders")
	b := e.dryRun(v)
	act := func(action, reason string, want int) string {
		t.Helper()
		_, page := get(t, e.c, e.srv.URL+"/replays/"+b.ID)
		res, body := postForm(t, e.c, e.srv.URL+"/replays/"+b.ID+"/"+action, url.Values{"csrf": {csrf(t, page)}, "reason": {reason}})
		if res.StatusCode != want {
			t.Fatalf("%s: %d, want %d\n%s", action, res.StatusCode, want, body)
		}
		return body
	}
	state := func(want quarantine.ReplayState) {
		t.Helper()
		if got := e.replay(b.ID).State; got != want {
			t.Fatalf("state %s, want %s", got, want)
		}
	}
	if body := act("pause", "x", http.StatusConflict); !strings.Contains(body, "Not done: a draft replay cannot be paused") {
		t.Fatalf("pause of a draft:\n%s", body)
	}
	state(quarantine.ReplayDraft)
	_, draft := get(t, e.c, e.srv.URL+"/replays/"+b.ID)
	if strings.Contains(draft, `id="reason-start"`) || !strings.Contains(draft, `id="start-reason"`) {
		t.Fatalf("the draft's Start asks the reason again:\n%s", draft)
	}
	act("start", "", http.StatusSeeOther)
	state(quarantine.ReplayRunning)
	if body := act("pause", " ", http.StatusUnprocessableEntity); !strings.Contains(body, "a reason is required") {
		t.Fatalf("pause without a reason:\n%s", body)
	}
	state(quarantine.ReplayRunning)
	_, page := get(t, e.c, e.srv.URL+"/replays/"+b.ID)
	if !strings.Contains(page, `id="pause"`) || strings.Contains(page, `id="start"`) || strings.Contains(page, `id="resume"`) {
		t.Fatalf("a running replay offers pause and cancel only:\n%s", page)
	}
	act("pause", "downstream slow", http.StatusSeeOther)
	state(quarantine.ReplayPaused)
	if b2 := e.replay(b.ID); b2.StateReason != "downstream slow" {
		t.Fatalf("state reason %q", b2.StateReason)
	}
	act("resume", "better", http.StatusSeeOther)
	state(quarantine.ReplayRunning)
	act("cancel", "enough", http.StatusSeeOther)
	state(quarantine.ReplayCancelled)
	_, page = get(t, e.c, e.srv.URL+"/replays/"+b.ID)
	if strings.Contains(page, `class="action"`) {
		t.Fatalf("a cancelled replay offers actions:\n%s", page)
	}
	if res, _ := postForm(t, e.c, e.srv.URL+"/replays/"+b.ID+"/explode", url.Values{"csrf": {csrf(t, page)}, "reason": {"x"}}); res.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown action: %d", res.StatusCode)
	}
	for action, reason := range map[string]string{quarantine.ActionReplayStart: b.Reason, quarantine.ActionReplayPause: "downstream slow",
		quarantine.ActionReplayResume: "better", quarantine.ActionReplayCancel: "enough"} {
		evs, err := e.store.ListAudit(context.Background(), quarantine.AuditFilter{Action: action, Subject: b.ID, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != 1 || evs[0].Actor != "token:op" || !strings.Contains(string(evs[0].Details), `"reason":"`+reason+`"`) {
			t.Fatalf("%s audit: %+v", action, evs)
		}
	}
}

// A viewer sees replays but gets no form and no button, and the server
// refuses (and audits) what it posts anyway; an operator of other owners
// does not find the batch. Forged POSTs (no CSRF token, another origin)
// are refused.
func TestReplayRefusals(t *testing.T) {
	t.Parallel()
	e := newReplayEnv(t)
	_, v := e.newForm(e.c, "queue=orders")
	b := e.dryRun(v)

	viewer := e.client()
	e.login(viewer, e.token("viewer", quarantine.RoleViewer))
	res, page := get(t, viewer, e.srv.URL+"/replays/"+b.ID)
	if res.StatusCode != http.StatusOK || strings.Contains(page, `class="action"`) || strings.Contains(page, `id="start"`) {
		t.Fatalf("viewer's replay page: %d, with actions?\n%s", res.StatusCode, page)
	}
	if res, _ := get(t, viewer, e.srv.URL+"/replays/new?queue=orders"); res.StatusCode != http.StatusForbidden {
		t.Fatalf("viewer's replay form: %d, want 403", res.StatusCode)
	}
	tok := csrf(t, page)
	if res, _ := postForm(t, viewer, e.srv.URL+"/replays/"+b.ID+"/start", url.Values{"csrf": {tok}, "reason": {"x"}}); res.StatusCode != http.StatusForbidden {
		t.Fatalf("viewer's start: %d, want 403", res.StatusCode)
	}
	v2 := url.Values{}
	for k, vs := range v {
		v2[k] = vs
	}
	v2.Set("csrf", tok)
	if res, _ := postForm(t, viewer, e.srv.URL+"/replays", v2); res.StatusCode != http.StatusForbidden {
		t.Fatalf("viewer's dry run: %d, want 403", res.StatusCode)
	}

	other := e.client()
	e.login(other, e.token("billing-op", quarantine.RoleOperator, "team-b"))
	_, page = get(t, other, e.srv.URL+"/replays")
	if strings.Contains(page, b.ID) {
		t.Fatal("another team's list shows the batch")
	}
	if res, _ := get(t, other, e.srv.URL+"/replays/"+b.ID); res.StatusCode != http.StatusNotFound {
		t.Fatalf("another team's GET: %d, want 404", res.StatusCode)
	}
	if res, _ := postForm(t, other, e.srv.URL+"/replays/"+b.ID+"/start", url.Values{"csrf": {csrf(t, page)}, "reason": {"x"}}); res.StatusCode != http.StatusNotFound {
		t.Fatalf("another team's start: %d, want 404", res.StatusCode)
	}

	_, page = get(t, e.c, e.srv.URL+"/replays/"+b.ID)
	tok = csrf(t, page)
	for _, c := range []struct {
		name   string
		v      url.Values
		header []string
	}{
		{"no csrf", url.Values{"reason": {"x"}}, nil},
		{"wrong csrf", url.Values{"csrf": {tok + "x"}, "reason": {"x"}}, nil},
		{"other origin", url.Values{"csrf": {tok}, "reason": {"x"}}, []string{"Origin", "https://evil.example"}},
		{"cross-site", url.Values{"csrf": {tok}, "reason": {"x"}}, []string{"Sec-Fetch-Site", "cross-site"}},
	} {
		if res, _ := postForm(t, e.c, e.srv.URL+"/replays/"+b.ID+"/start", c.v, c.header...); res.StatusCode != http.StatusForbidden {
			t.Fatalf("%s start: %d, want 403", c.name, res.StatusCode)
		}
		w := url.Values{}
		for k, vs := range v {
			w[k] = vs
		}
		w.Del("csrf")
		for k, vs := range c.v {
			w[k] = vs
		}
		if res, _ := postForm(t, e.c, e.srv.URL+"/replays", w, c.header...); res.StatusCode != http.StatusForbidden {
			t.Fatalf("%s dry run: %d, want 403", c.name, res.StatusCode)
		}
	}
	if got := e.replay(b.ID).State; got != quarantine.ReplayDraft {
		t.Fatalf("a refused start moved the batch to %s", got)
	}
	if list, _, _ := e.store.ListReplays(context.Background(), quarantine.ReplayFilter{Limit: 10}); len(list) != 1 {
		t.Fatalf("refused dry runs created batches: %d", len(list))
	}
	evs, err := e.store.ListAudit(context.Background(), quarantine.AuditFilter{Action: quarantine.ActionAccessDenied, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]int{}
	for _, ev := range evs {
		by[ev.Actor]++
	}
	if by["token:viewer"] != 3 || by["token:billing-op"] != 1 {
		t.Fatalf("access.denied by actor: %v (want 3 of the viewer, 1 of billing-op)", by)
	}
}

// The list filters by state and queue; the progress fragment and the
// report give the batch's numbers.
func TestReplayListProgressReport(t *testing.T) {
	t.Parallel()
	e := newReplayEnv(t)
	_, v := e.newForm(e.c, "queue=orders")
	draft := e.dryRun(v)
	_, v = e.newForm(e.c, "queue=billing")
	b := e.dryRun(v)
	_, page := get(t, e.c, e.srv.URL+"/replays/"+b.ID)
	postForm(t, e.c, e.srv.URL+"/replays/"+b.ID+"/start", url.Values{"csrf": {csrf(t, page)}, "reason": {"go"}})

	for q, want := range map[string][]string{"": {draft.ID, b.ID}, "state=draft": {draft.ID}, "state=running": {b.ID},
		"queue=billing": {b.ID}, "state=completed": nil} {
		res, page := get(t, e.c, e.srv.URL+"/replays?"+q)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("list %s: %d", q, res.StatusCode)
		}
		got := regexp.MustCompile(`<tr data-id="([^"]+)">`).FindAllStringSubmatch(page, -1)
		if len(got) != len(want) {
			t.Fatalf("list %q: %d rows, want %v", q, len(got), want)
		}
		for i, g := range got {
			if g[1] != want[len(want)-1-i] { // newest first
				t.Fatalf("list %q: %v, want %v newest first", q, got, want)
			}
		}
	}
	if res, _ := get(t, e.c, e.srv.URL+"/replays?state=bogus"); res.StatusCode != http.StatusBadRequest {
		t.Fatalf("bad state: %d", res.StatusCode)
	}

	res, body := get(t, e.c, e.srv.URL+"/replays/"+b.ID+"/progress")
	var p struct {
		State    string         `json:"state"`
		Total    int            `json:"total"`
		Done     int            `json:"done"`
		Counts   map[string]int `json:"counts"`
		ETA      *float64       `json:"eta_seconds"`
		Terminal bool           `json:"terminal"`
	}
	if err := json.Unmarshal([]byte(body), &p); err != nil || res.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("progress %s: %v", body, err)
	}
	if p.State != "running" || p.Total != 1 || p.Done != 0 || p.Counts["pending"] != 1 || p.ETA == nil || p.Terminal {
		t.Fatalf("progress: %+v", p)
	}

	res, body = get(t, e.c, e.srv.URL+"/replays/"+b.ID+"/report")
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("report: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(strings.NewReader(body))
	var lines []map[string]any
	for sc.Scan() {
		var l map[string]any
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("report line %q: %v", sc.Text(), err)
		}
		lines = append(lines, l)
	}
	if len(lines) != 2 || lines[0]["type"] != "batch" || lines[0]["id"] != b.ID || lines[1]["type"] != "item" {
		t.Fatalf("report: %v", lines)
	}
	if res, _ := get(t, e.c, e.srv.URL+"/replays/"+b.ID+"x/progress"); res.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown replay's progress: %d", res.StatusCode)
	}
}

// Hostile strings in a replay's reason, queue and items are text.
func TestReplayHostileAsText(t *testing.T) {
	t.Parallel()
	e := newReplayEnv(t)
	hostile := `"><img src=x onerror=alert(1)><script>alert(2)</script>`
	m := e.message(quarantine.Message{Queue: `<svg onload=alert(3)>`, JobName: "j", IdempotencyKey: "h", Payload: []byte(`{}`)})
	_, v := e.newForm(e.c, "ids="+m.ID)
	v.Set("reason", hostile)
	b := e.dryRun(v)
	for _, u := range []string{"/replays/" + b.ID, "/replays", "/replays/new?queue=" + url.QueryEscape(m.Queue)} {
		_, page := get(t, e.c, e.srv.URL+u)
		for _, bad := range []string{"<img src=x", "<script>alert", "<svg onload"} {
			if strings.Contains(page, bad) {
				t.Fatalf("%s holds %q unescaped:\n%s", u, bad, page)
			}
		}
	}
}

// The selection reads every filter of the messages page (here its
// idempotency_key), and the count that page showed (expect_count) stays
// pinned: when the selection changed since, the form says so and the dry
// run is refused, then the form pins the new count.
func TestReplayFilterAndCountFromTheMessagesPage(t *testing.T) {
	t.Parallel()
	e := newReplayEnv(t)
	body, v := e.newForm(e.c, "idempotency_key=ka&idempotency_key=kb")
	if !strings.Contains(body, `id="selection-count"><strong>2</strong>`) || len(v["idempotency_key"]) != 2 {
		t.Fatalf("idempotency_key filter: %v\n%s", v, body)
	}
	body, v = e.newForm(e.c, "queue=orders&expect_count=2")
	if !strings.Contains(body, `id="selection-changed"`) || v.Get("expect_count") != "2" {
		t.Fatalf("a changed count is not shown or not pinned: %v\n%s", v, body)
	}
	res, page := postForm(t, e.c, e.srv.URL+"/replays", v)
	if res.StatusCode != http.StatusConflict || !expectRE.MatchString(page) || expectRE.FindStringSubmatch(page)[1] != "3" {
		t.Fatalf("dry run of a changed selection: %d\n%s", res.StatusCode, page)
	}
	if res, _ := get(t, e.c, e.srv.URL+"/replays/new?queue=orders&ids="+e.orders[0].ID); res.StatusCode != http.StatusBadRequest {
		t.Fatalf("ids and a filter: %d, want 400", res.StatusCode)
	}
	if res, _ := get(t, e.c, e.srv.URL+"/replays/new?status=bogus"); res.StatusCode != http.StatusBadRequest {
		t.Fatalf("a bad filter: %d, want 400", res.StatusCode)
	}
}

// The replays list, a replay's page and its report show the same achieved
// rate: published per second while publishing, a pause excluded. The
// batch published 1 of its 2 messages at 1 msg/s, then was paused for
// ten minutes: 1.0 msg/s, not the 0.0 of the whole time since its start.
func TestReplayAchievedRateExcludesPausesEverywhere(t *testing.T) {
	t.Parallel()
	now := time.Now().Add(10 * time.Minute)
	e := newEnv(t, func(c *web.Config) { c.Now = func() time.Time { return now } })
	c := e.client()
	e.login(c, e.token("op", quarantine.RoleOperator))
	ctx := context.Background()
	var ids []string
	for i := range 2 {
		ids = append(ids, e.message(quarantine.Message{Queue: "orders", JobName: "charge", IdempotencyKey: fmt.Sprintf("order:%d", i),
			Payload: []byte(`{}`), Reason: "declined"}).ID)
	}
	b, err := e.store.CreateReplay(ctx, quarantine.ReplayRequest{IDs: ids, Rate: 1, Reason: "fixed", Actor: "token:op"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ls, err := e.store.LeaseReplayItems(ctx, b.ID, "engine", 1, time.Minute, 0)
	if err != nil || len(ls) != 1 {
		t.Fatalf("lease: %v %v", ls, err)
	}
	if _, err := e.store.RecordReplayResults(ctx, []quarantine.ReplayResult{{BatchID: b.ID, MessageID: ls[0].Item.MessageID, Fence: ls[0].Fence,
		Outcome: quarantine.ItemPublished, Destination: "memory:test/orders", PayloadVersion: ls[0].Message.PayloadVersion,
		PayloadSHA256: ls[0].Message.PayloadSHA256, At: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.ChangeReplay(ctx, quarantine.ReplayChange{BatchID: b.ID, Action: quarantine.ReplayActPause, Actor: "token:op", Reason: "downstream slow"}); err != nil {
		t.Fatal(err)
	}
	const want = "1.0 msg/s"
	_, list := get(t, c, e.srv.URL+"/replays")
	row := list[strings.Index(list, `<tr data-id="`+b.ID+`">`):]
	row = row[:strings.Index(row, "</tr>")]
	if !strings.Contains(row, `<td class="num">`+want+`</td>`) {
		t.Errorf("the list's row shows another rate than %s:\n%s", want, row)
	}
	if _, page := get(t, c, e.srv.URL+"/replays/"+b.ID); !strings.Contains(page, `<dd id="replay-rate">`+want+`</dd>`) {
		t.Errorf("the replay's page shows another rate than %s", want)
	}
	_, report := get(t, c, e.srv.URL+"/replays/"+b.ID+"/report")
	var head struct {
		AchievedRate *float64 `json:"achieved_rate"`
	}
	if err := json.Unmarshal([]byte(report[:strings.Index(report, "\n")]), &head); err != nil || head.AchievedRate == nil || *head.AchievedRate != 1 {
		t.Errorf("the report's achieved rate is %v (%v), want 1", head.AchievedRate, err)
	}
}

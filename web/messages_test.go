package web_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/web"
)

var rowIDRE = regexp.MustCompile(`<tr data-id="([0-9A-Z]+)"`)

// rowIDs returns the ids of a page's message rows, sorted.
func rowIDs(body string) []string {
	var out []string
	for _, m := range rowIDRE.FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	sort.Strings(out)
	return out
}

func sortedIDs(ms ...*quarantine.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	sort.Strings(out)
	return out
}

// statusOf returns the stored status of message id.
func (e *env) statusOf(id string) quarantine.Status {
	e.t.Helper()
	m, err := e.store.GetMessage(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return m.Status
}

// audit returns the audit events of action.
func (e *env) audit(action string) []quarantine.AuditEvent {
	e.t.Helper()
	evs, err := e.store.ListAudit(context.Background(), quarantine.AuditFilter{Action: action, Limit: 1000})
	if err != nil {
		e.t.Fatal(err)
	}
	return evs
}

// Every filter of the API is a field of the filter bar, and selects the
// messages the API's filter would.
func TestWebMessagesEveryFilter(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	now := time.Now().UTC()
	a := e.message(quarantine.Message{Queue: "orders", JobName: "charge", Owner: "team-a", Source: "rmq", IdempotencyKey: "k-a",
		FailureClass: quarantine.ClassPermanent, Reason: "card declined", FailedAt: now.Add(-3 * time.Hour), Payload: []byte(`{"sku":"apple"}`)})
	b := e.message(quarantine.Message{Queue: "orders", JobName: "refund", Owner: "team-a", Source: "sqs", IdempotencyKey: "k-b",
		FailureClass: quarantine.ClassExhausted, Reason: "timeout", FailedAt: now.Add(-time.Hour), Payload: []byte(`{"sku":"pear"}`)})
	c := e.message(quarantine.Message{Queue: "billing", JobName: "charge", Owner: "team-b", Source: "rmq", IdempotencyKey: "k-c",
		FailureClass: quarantine.ClassPermanent, Reason: "card declined", FailedAt: now.Add(-10 * time.Minute), Payload: []byte(`{"sku":"plum"}`)})
	if _, err := e.store.Discard(context.Background(), quarantine.Discard{IDs: []string{b.ID}, Reason: "x", Actor: "t"}); err != nil {
		t.Fatal(err)
	}
	cl := e.client()
	e.login(cl, e.token("admin", quarantine.RoleAdmin))
	for _, tc := range []struct {
		query string
		want  []*quarantine.Message
	}{
		{"", []*quarantine.Message{a, b, c}},
		{"queue=orders", []*quarantine.Message{a, b}},
		{"queue=orders&queue=billing", []*quarantine.Message{a, b, c}},
		{"job_name=charge", []*quarantine.Message{a, c}},
		{"status=discarded", []*quarantine.Message{b}},
		{"status=quarantined&status=discarded", []*quarantine.Message{a, b, c}},
		{"failure_class=exhausted", []*quarantine.Message{b}},
		{"owner=team-b", []*quarantine.Message{c}},
		{"source=rmq", []*quarantine.Message{a, c}},
		{"idempotency_key=k-b", []*quarantine.Message{b}},
		{"fingerprint=" + a.Fingerprint, []*quarantine.Message{a, c}},
		{"failed_after=" + url.QueryEscape(now.Add(-2*time.Hour).Format(time.RFC3339)), []*quarantine.Message{b, c}},
		// The datetime-local input's form, read as UTC, with and without seconds.
		{"failed_before=" + now.Add(-2*time.Hour).Format("2006-01-02T15:04:05"), []*quarantine.Message{a}},
		{"failed_before=" + now.Add(-2*time.Hour).Format("2006-01-02T15:04"), []*quarantine.Message{a}},
		{"older_than=30m", []*quarantine.Message{a, b}},
		{"q=pear", []*quarantine.Message{b}},
		{"q=declined&queue=billing", []*quarantine.Message{c}},
		// The untouched inputs of the form are empty: ignored.
		{"queue=&job_name=&owner=&q=&failed_after=&status=discarded", []*quarantine.Message{b}},
	} {
		res, body := get(t, cl, e.srv.URL+"/messages?"+tc.query)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d", tc.query, res.StatusCode)
		}
		if got, want := rowIDs(body), sortedIDs(tc.want...); !slices.Equal(got, want) {
			t.Errorf("?%s: rows %v, want %v", tc.query, got, want)
		}
	}
	// The bar shows the filter given back, each field labelled.
	_, body := get(t, cl, e.srv.URL+"/messages?queue=orders&status=discarded&older_than=30m&q=pear&failed_after=2026-01-02T03:04:05Z")
	for _, want := range []string{`name="queue" value="orders"`, `<option value="discarded" selected>`, `name="older_than" value="30m"`,
		`name="q" value="pear"`, `name="failed_after" value="2026-01-02T03:04:05"`, `<label>Idempotency key <input name="idempotency_key"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the filter bar lacks %s", want)
		}
	}
	// Refusals name the field.
	for q, want := range map[string]string{"status=bogus": "unknown status", "older_than=soon": "age", "failed_after=yesterday": "RFC 3339",
		"older_than=1h&failed_before=2026-01-02T03:04:05Z": "not both"} {
		res, body := get(t, cl, e.srv.URL+"/messages?"+q)
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(html.UnescapeString(body), want) {
			t.Errorf("?%s: %d, want 400 with %q", q, res.StatusCode, want)
		}
	}
	// The equivalent curl of the list carries the filter (with the list's
	// default statuses, as the page shows them), not the token.
	_, body = get(t, cl, e.srv.URL+"/messages?queue=orders")
	if !strings.Contains(html.UnescapeString(body), `curl -H "Authorization: Bearer $QUARANTINE_TOKEN" '`+e.srv.URL+`/api/v1/messages?queue=orders&status=quarantined&status=replaying&status=refailed&status=discarded'`) {
		t.Errorf("no curl of the list in %s", body)
	}
}

// A scoped token sees only its owners; the owner field offers them, and
// asking for another team's owner matches nothing.
func TestWebMessagesOwnerFieldScoped(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.message(quarantine.Message{Queue: "q", Owner: "team-a", Payload: []byte(`{}`)})
	b := e.message(quarantine.Message{Queue: "q", Owner: "team-b", Payload: []byte(`{}`)})
	c2 := e.message(quarantine.Message{Queue: "q", Owner: "team-c", Payload: []byte(`{}`)})
	cl := e.client()
	e.login(cl, e.token("ab", quarantine.RoleViewer, "team-a", "team-b"))
	for q, want := range map[string][]string{"": sortedIDs(a, b), "owner=team-b": {b.ID}, "owner=team-c": nil, "owner=team-c&owner=team-a": {a.ID}} {
		_, body := get(t, cl, e.srv.URL+"/messages?"+q)
		if got := rowIDs(body); !slices.Equal(got, want) {
			t.Errorf("?%s: %v, want %v", q, got, want)
		}
		if strings.Contains(body, c2.ID) {
			t.Fatalf("?%s shows another team's message", q)
		}
	}
	_, body := get(t, cl, e.srv.URL+"/messages")
	if !strings.Contains(body, `<select name="owner" multiple`) || !strings.Contains(body, `<option value="team-b">`) || strings.Contains(body, "team-c") {
		t.Errorf("a scoped token's owner field offers its owners: %s", body)
	}
}

// bulkForm opens the bulk page of query and returns its body and CSRF.
func bulkPage(t *testing.T, e *env, c *http.Client, query string) (int, string) {
	t.Helper()
	res, body := get(t, c, e.srv.URL+"/messages/bulk?"+query)
	return res.StatusCode, body
}

var countRE = regexp.MustCompile(`<strong id="count">(\d+)</strong>`)

func pageCount(t *testing.T, body string) int {
	t.Helper()
	m := countRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no count in %s", body)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// Checked rows are discarded with a reason, each with its message.discard
// event (actor, reason), through the same rules as the API.
func TestWebBulkDiscardSelected(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var ms []*quarantine.Message
	for i := range 3 {
		ms = append(ms, e.message(quarantine.Message{Queue: "orders", Reason: "r" + strconv.Itoa(i), Payload: []byte(`{}`)}))
	}
	c := e.client()
	e.login(c, e.token("op", quarantine.RoleOperator))
	_, list := get(t, c, e.srv.URL+"/messages")
	for _, want := range []string{`<form method="get" action="/messages/bulk" id="selection"`, `name="ids" value="` + ms[0].ID + `" form="selection"`,
		`formaction="/replays/new"`, `id="select-all"`} {
		if !strings.Contains(list, want) {
			t.Fatalf("the list lacks %s", want)
		}
	}
	status, body := bulkPage(t, e, c, "ids="+ms[0].ID+"&ids="+ms[2].ID+"&ids="+ms[0].ID)
	if status != http.StatusOK || pageCount(t, body) != 2 || !strings.Contains(body, `href="/replays/new?ids=`+ms[0].ID+`&amp;ids=`+ms[2].ID+`"`) {
		t.Fatalf("bulk page: %d %s", status, body)
	}
	res, body := postForm(t, c, e.srv.URL+"/messages/discard", url.Values{"csrf": {csrf(t, body)},
		"ids": {ms[0].ID, ms[2].ID}, "reason": {"poison pills"}})
	if res.StatusCode != http.StatusOK || !strings.Contains(body, `<span id="changed-count">2</span>`) {
		t.Fatalf("discard: %d %s", res.StatusCode, body)
	}
	for i, want := range []quarantine.Status{quarantine.StatusDiscarded, quarantine.StatusQuarantined, quarantine.StatusDiscarded} {
		if got := e.statusOf(ms[i].ID); got != want {
			t.Errorf("message %d: %s, want %s", i, got, want)
		}
	}
	evs := e.audit(quarantine.ActionDiscard)
	if len(evs) != 2 {
		t.Fatalf("%d discard events, want 2", len(evs))
	}
	for _, ev := range evs {
		if ev.Actor != "token:op" || !strings.Contains(string(ev.Details), `"poison pills"`) {
			t.Errorf("event %+v", ev)
		}
	}
	// Again: both skipped (already discarded), nothing changes.
	res, body = postForm(t, c, e.srv.URL+"/messages/discard", url.Values{"csrf": {csrf(t, body)},
		"ids": {ms[0].ID}, "reason": {"again"}})
	if res.StatusCode != http.StatusOK || !strings.Contains(body, `<span id="skipped-count">1</span>`) {
		t.Fatalf("second discard: %d %s", res.StatusCode, body)
	}
}

// "All N matching" pins the count: a message arriving between the count
// and the confirmation makes the discard 409 and changes nothing; the new
// count is shown and discards.
func TestWebBulkDiscardAllMatchingPinsTheCount(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for range 3 {
		e.message(quarantine.Message{Queue: "orders", Payload: []byte(`{}`)})
	}
	other := e.message(quarantine.Message{Queue: "billing", Payload: []byte(`{}`)})
	c := e.client()
	e.login(c, e.token("op", quarantine.RoleOperator))
	status, body := bulkPage(t, e, c, "all=1&queue=orders")
	if status != http.StatusOK || pageCount(t, body) != 3 || !strings.Contains(body, `name="expect_count" value="3"`) ||
		!strings.Contains(body, `<input type="hidden" name="queue" value="orders">`) || !strings.Contains(body, `href="/replays/new?expect_count=3&amp;queue=orders"`) {
		t.Fatalf("all matching: %d %s", status, body)
	}
	late := e.message(quarantine.Message{Queue: "orders", Payload: []byte(`{}`)})
	form := url.Values{"csrf": {csrf(t, body)}, "all": {"1"}, "queue": {"orders"}, "expect_count": {"3"}, "reason": {"drain"}}
	res, body := postForm(t, c, e.srv.URL+"/messages/discard", form)
	if res.StatusCode != http.StatusConflict || pageCount(t, body) != 4 || !strings.Contains(body, `name="expect_count" value="4"`) {
		t.Fatalf("stale count: %d, want 409 with the new count: %s", res.StatusCode, body)
	}
	if e.statusOf(late.ID) != quarantine.StatusQuarantined || len(e.audit(quarantine.ActionDiscard)) != 0 {
		t.Fatal("a refused discard changed messages")
	}
	form.Set("expect_count", "4")
	res, body = postForm(t, c, e.srv.URL+"/messages/discard", form)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, `<span id="changed-count">4</span>`) {
		t.Fatalf("discard: %d %s", res.StatusCode, body)
	}
	if !strings.Contains(body, `<a href="/messages?queue=orders">Back to the messages</a>`) {
		t.Errorf("the result does not lead back to the filtered list: %s", body)
	}
	if e.statusOf(late.ID) != quarantine.StatusDiscarded || e.statusOf(other.ID) != quarantine.StatusQuarantined {
		t.Fatal("the filter's messages, and only them, are discarded")
	}
	// An empty filter selects everything: allowed only with its count.
	status, body = bulkPage(t, e, c, "all=1")
	if status != http.StatusOK || pageCount(t, body) != 5 || !strings.Contains(body, "all the messages you may see") {
		t.Fatalf("empty filter: %d %s", status, body)
	}
	res, _ = postForm(t, c, e.srv.URL+"/messages/discard", url.Values{"csrf": {csrf(t, body)}, "all": {"1"}, "reason": {"x"}})
	if res.StatusCode != http.StatusBadRequest || e.statusOf(other.ID) != quarantine.StatusQuarantined {
		t.Fatalf("all without expect_count: %d, want 400", res.StatusCode)
	}
}

// The bulk forms refuse: no CSRF token, another origin, no reason, a
// viewer (403, audited), bad ids.
func TestWebBulkDiscardRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.message(quarantine.Message{Queue: "orders", Payload: []byte(`{}`)})
	op, viewer := e.client(), e.client()
	e.login(op, e.token("op", quarantine.RoleOperator))
	e.login(viewer, e.token("viewer", quarantine.RoleViewer))
	_, body := get(t, op, e.srv.URL+"/messages")
	tok := csrf(t, body)
	_, vbody := get(t, viewer, e.srv.URL+"/messages")
	vtok := csrf(t, vbody)
	if strings.Contains(vbody, `id="selection"`) || strings.Contains(vbody, `name="ids"`) {
		t.Fatal("a viewer is shown the selection")
	}
	ok := url.Values{"csrf": {tok}, "ids": {m.ID}, "reason": {"x"}}
	for _, c := range []struct {
		name   string
		client *http.Client
		form   url.Values
		header []string
		want   int
	}{
		{"no csrf", op, url.Values{"ids": {m.ID}, "reason": {"x"}}, nil, http.StatusForbidden},
		{"forged csrf", op, url.Values{"csrf": {"forged"}, "ids": {m.ID}, "reason": {"x"}}, nil, http.StatusForbidden},
		{"another origin", op, ok, []string{"Origin", "http://evil.example"}, http.StatusForbidden},
		{"cross-site", op, ok, []string{"Sec-Fetch-Site", "cross-site"}, http.StatusForbidden},
		{"no reason", op, url.Values{"csrf": {tok}, "ids": {m.ID}}, nil, http.StatusUnprocessableEntity}, // as the API
		{"bad id", op, url.Values{"csrf": {tok}, "ids": {"nope"}, "reason": {"x"}}, nil, http.StatusBadRequest},
		{"no ids", op, url.Values{"csrf": {tok}, "reason": {"x"}}, nil, http.StatusBadRequest},
		{"viewer", viewer, url.Values{"csrf": {vtok}, "ids": {m.ID}, "reason": {"x"}}, nil, http.StatusForbidden},
	} {
		res, _ := postForm(t, c.client, e.srv.URL+"/messages/discard", c.form, c.header...)
		if res.StatusCode != c.want {
			t.Errorf("%s: %d, want %d", c.name, res.StatusCode, c.want)
		}
	}
	if e.statusOf(m.ID) != quarantine.StatusQuarantined {
		t.Fatal("a refused discard changed the message")
	}
	if status, _ := bulkPage(t, e, viewer, "ids="+m.ID); status != http.StatusForbidden {
		t.Fatalf("viewer bulk page: %d, want 403", status)
	}
	denied := e.audit(quarantine.ActionAccessDenied)
	if len(denied) != 2 || !strings.Contains(string(denied[0].Details), "operator") || denied[0].Actor != "token:viewer" {
		t.Fatalf("the viewer's refusals are audited: %+v", denied)
	}
}

// A scoped operator's ids of another team are skipped as not found and
// audited; its filter is narrowed to its owners.
func TestWebBulkDiscardScoped(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	mine := e.message(quarantine.Message{Queue: "orders", Owner: "team-a", Payload: []byte(`{}`)})
	theirs := e.message(quarantine.Message{Queue: "orders", Owner: "team-b", Payload: []byte(`{}`)})
	c := e.client()
	e.login(c, e.token("a-op", quarantine.RoleOperator, "team-a"))
	status, body := bulkPage(t, e, c, "ids="+mine.ID+"&ids="+theirs.ID)
	if status != http.StatusOK || pageCount(t, body) != 1 || !strings.Contains(body, `id="missing"`) || strings.Contains(body, `name="ids" value="`+theirs.ID) {
		t.Fatalf("bulk page of another team's id: %d %s", status, body)
	}
	res, body := postForm(t, c, e.srv.URL+"/messages/discard", url.Values{"csrf": {csrf(t, body)}, "ids": {mine.ID, theirs.ID}, "reason": {"x"}})
	if res.StatusCode != http.StatusOK || !strings.Contains(body, `<span id="changed-count">1</span>`) || !strings.Contains(body, "not found") {
		t.Fatalf("scoped discard: %d %s", res.StatusCode, body)
	}
	if e.statusOf(theirs.ID) != quarantine.StatusQuarantined {
		t.Fatal("another team's message was discarded")
	}
	denied := e.audit(quarantine.ActionAccessDenied)
	if len(denied) != 1 || !strings.Contains(string(denied[0].Details), theirs.ID) {
		t.Fatalf("the attempt on another team's message is audited: %+v", denied)
	}
	// All matching, owner=team-b: nothing is the token's.
	status, body = bulkPage(t, e, c, "all=1&owner=team-b")
	if status != http.StatusOK || pageCount(t, body) != 0 {
		t.Fatalf("other owner: %d %s", status, body)
	}
	res, _ = postForm(t, c, e.srv.URL+"/messages/discard", url.Values{"csrf": {csrf(t, body)}, "all": {"1"}, "owner": {"team-b"},
		"expect_count": {"1"}, "reason": {"x"}})
	if res.StatusCode != http.StatusConflict || e.statusOf(theirs.ID) != quarantine.StatusQuarantined {
		t.Fatalf("filter on another team with a count: %d, want 409", res.StatusCode)
	}
}

// "sample n" is the store's uniform sample of the filter, reproducible by
// its seed, within the token's owners.
func TestWebSample(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *web.Config) { c.RedactPointers = []string{"/card"} })
	in := map[string]bool{}
	for range 20 {
		in[e.message(quarantine.Message{Queue: "orders", Owner: "team-a", Payload: []byte(`{}`)}).ID] = true
	}
	for range 5 {
		e.message(quarantine.Message{Queue: "billing", Owner: "team-a", Payload: []byte(`{}`)})
	}
	hidden := e.message(quarantine.Message{Queue: "orders", Owner: "team-b", Payload: []byte(`{}`)})
	c := e.client()
	e.login(c, e.token("a-viewer", quarantine.RoleViewer, "team-a"))
	_, list := get(t, c, e.srv.URL+"/messages?queue=orders")
	if !strings.Contains(list, `<form method="get" action="/messages/sample"`) || !strings.Contains(list, `<input type="hidden" name="queue" value="orders">`) {
		t.Fatalf("no sample form carrying the filter: %s", list)
	}
	res, body := get(t, c, e.srv.URL+"/messages/sample?queue=orders&size=5&seed=42")
	first := rowIDs(body)
	if res.StatusCode != http.StatusOK || len(first) != 5 || !strings.Contains(body, `<code id="seed">42</code>`) {
		t.Fatalf("sample: %d %d rows %s", res.StatusCode, len(first), body)
	}
	for _, id := range first {
		if !in[id] {
			t.Fatalf("sampled %s, not an orders message of team-a (hidden %s)", id, hidden.ID)
		}
	}
	if !strings.Contains(body, `href="/messages?queue=orders&amp;status=quarantined&amp;status=replaying&amp;status=refailed&amp;status=discarded" id="back-to-list"`) {
		t.Errorf("the sample does not lead back to the filtered list: %s", body)
	}
	_, again := get(t, c, e.srv.URL+"/messages/sample?queue=orders&size=5&seed=42")
	if !slices.Equal(rowIDs(again), first) {
		t.Fatal("the same seed gives another sample")
	}
	if !strings.Contains(html.UnescapeString(body), `"seed":42`) || !strings.Contains(body, "/api/v1/messages/sample") {
		t.Fatalf("no curl of the sample: %s", body)
	}
	// Stratified: the choice is shown back, and the store's stratified
	// sample is the page's.
	_, body = get(t, c, e.srv.URL+"/messages/sample?size=6&seed=3&stratify_by=queue")
	want, err := e.store.Sample(context.Background(), quarantine.SampleRequest{Filter: quarantine.Filter{Owner: []string{"team-a"}},
		Size: 6, Seed: 3, StratifyBy: quarantine.StratifyQueue})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rowIDs(body), sortedIDs(want...)) || !strings.Contains(body, `<option value="queue" selected>`) ||
		!strings.Contains(body, "stratified by queue") {
		t.Fatalf("stratified sample %v, want %v: %s", rowIDs(body), sortedIDs(want...), body)
	}
	// A fresh sample picks a seed.
	_, body = get(t, c, e.srv.URL+"/messages/sample?queue=orders")
	if n := len(rowIDs(body)); n != 10 {
		t.Fatalf("default sample: %d rows, want 10", n)
	}
	for q, want := range map[string]int{"size=0": 400, "size=1001": 400, "size=x": 400, "seed=x": 400, "stratify_by=owner": 400, "q=4111": 403} {
		if res, _ := get(t, c, e.srv.URL+"/messages/sample?"+q); res.StatusCode != want {
			t.Errorf("sample ?%s: %d, want %d", q, res.StatusCode, want)
		}
	}
}

// The list, the sample and the groups leave replayed messages out unless
// a status is asked for, as an explicit filter (the curl, the bulk link
// and the count say so), and the list counts what matches.
func TestWebListsLeaveReplayedOutByDefault(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.client()
	e.login(c, e.token("op", quarantine.RoleOperator))
	waiting := e.message(quarantine.Message{Queue: "orders", JobName: "charge", IdempotencyKey: "order:1", Reason: "card declined", Payload: []byte(`{}`)})
	done := e.message(quarantine.Message{Queue: "orders", JobName: "charge", IdempotencyKey: "order:2", Reason: "card declined", Payload: []byte(`{}`)})
	e.replayed(done, "fixed")
	if got := e.statusOf(done.ID); got != quarantine.StatusReplayed {
		t.Fatalf("the replayed message is %s", got)
	}
	count := regexp.MustCompile(`<strong class="match-count" id="count">(\d+)</strong>`)
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"", []string{waiting.ID}},
		{"queue=orders", []string{waiting.ID}},
		{"status=replayed", []string{done.ID}},
		{"status=replayed&status=quarantined", sortedIDs(waiting, done)},
	} {
		res, body := get(t, c, e.srv.URL+"/messages?"+tc.query)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("?%s: %d", tc.query, res.StatusCode)
		}
		if got := rowIDs(body); !slices.Equal(got, tc.want) {
			t.Errorf("?%s lists %v, want %v", tc.query, got, tc.want)
		}
		if m := count.FindStringSubmatch(body); m == nil || m[1] != strconv.Itoa(len(tc.want)) {
			t.Errorf("?%s counts %v, want %d", tc.query, m, len(tc.want))
		}
		defaulted := !strings.Contains(tc.query, "status=")
		if strings.Contains(body, "by default, not the replayed messages") != defaulted {
			t.Errorf("?%s: the default is said %v, want %v", tc.query, !defaulted, defaulted)
		}
		if defaulted && (!strings.Contains(body, `id="select-all"`) || strings.Contains(html.UnescapeString(body), "status=replayed")) {
			t.Errorf("?%s: the links do not pin the default statuses", tc.query)
		}
	}
	_, body := get(t, c, e.srv.URL+"/messages/sample?size=5&seed=1")
	if got := rowIDs(body); !slices.Equal(got, []string{waiting.ID}) {
		t.Errorf("the sample holds %v, want only %s", got, waiting.ID)
	}
	_, body = get(t, c, e.srv.URL+"/groups")
	if m := groupLinkRE.FindStringSubmatch(body); m == nil || m[3] != "1" {
		t.Errorf("the group counts %v, want 1 message", m)
	}
	_, body = get(t, c, e.srv.URL+"/groups?status=replayed&status=quarantined")
	if m := groupLinkRE.FindStringSubmatch(body); m == nil || m[3] != "2" {
		t.Errorf("the group with replayed counts %v, want 2 messages", m)
	}
}

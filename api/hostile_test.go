package api_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/quarantine-dev/quarantine"
)

func TestHostileParameters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ingestOK(e.operator, envelopeJSON("billing", "a", 1, baseTime))
	forged := base64.RawURLEncoding.EncodeToString([]byte(`{"t":"2026-01-01T00:00:00Z","i":"1 OR 1=1"}`))
	extra := base64.RawURLEncoding.EncodeToString([]byte(`{"t":"2026-01-01T00:00:00Z","i":"` + quarantine.NewID(baseTime) + `","x":1}`))
	cases := []struct {
		target string
		status int
		field  string
	}{
		{"/api/v1/messages?cursor=" + forged, 400, "cursor"},
		{"/api/v1/messages?cursor=" + extra, 400, "cursor"},
		{"/api/v1/messages?cursor=not-base64!", 400, "cursor"},
		{"/api/v1/messages?cursor=" + strings.Repeat("A", 300), 400, "cursor"},
		{"/api/v1/messages?queue=%ff", 400, "queue"},
		{"/api/v1/messages?job_name=a%00b", 400, "job_name"},
		{"/api/v1/messages?q=%00", 400, "q"},
		{"/api/v1/messages?owner=%c3%28", 400, "owner"},
		{"/api/v1/messages?queue=" + strings.Repeat("x", 2000), 400, "queue"},
		{"/api/v1/messages?" + strings.Repeat("queue=a&", 101), 400, "queue"},
		{"/api/v1/messages?limit=1000000", 400, "limit"},
		{"/api/v1/messages?limit=99999999999999999999999", 400, "limit"},
		{"/api/v1/messages?limit=0", 400, "limit"},
		{"/api/v1/messages?limit=-5", 400, "limit"},
		{"/api/v1/messages?limit=ten", 400, "limit"},
		{"/api/v1/messages?limit=1&limit=2", 400, "limit"},
		{"/api/v1/messages?status=deleted", 400, "status"},
		{"/api/v1/messages?failure_class=%27%20OR%201=1", 400, "failure_class"},
		{"/api/v1/messages?failed_after=yesterday", 400, "failed_after"},
		{"/api/v1/messages?failed_before=2026-13-01T00:00:00Z", 400, "failed_before"},
		{"/api/v1/messages?failed_after=2026-02-01T00:00:00Z&failed_before=2026-01-01T00:00:00Z", 400, "failed_after"},
		{"/api/v1/messages?sort=id", 400, "sort"},
		{"/api/v1/messages?queue=a&Queue=b", 400, "Queue"},
		{"/api/v1/messages?%ff=1", 400, "\uFFFD"},
		{"/api/v1/messages?%zz", 400, "query"},
		{"/api/v1/messages/not-a-ulid", 404, "id"},
		{"/api/v1/messages/%27%20OR%201=1--", 404, "id"},
		{"/api/v1/messages/%00", 404, "id"},
		{"/api/v1/messages/" + strings.Repeat("Z", 26), 404, "id"},
		{"/api/v1/audit?cursor=-1", 400, "cursor"},
		{"/api/v1/audit?cursor=1%3BDROP", 400, "cursor"},
		{"/api/v1/audit?cursor=1;DROP", 400, "query"},
		{"/api/v1/audit?limit=100000", 400, "limit"},
		{"/api/v1/audit?after=now", 400, "after"},
		{"/api/v1/audit?actor=%ff", 400, "actor"},
		{"/api/v1/audit?action=a%00", 400, "action"},
		{"/api/v1/audit?subject=a&message=b", 400, "message"},
		{"/api/v1/audit?seq=1", 400, "seq"},
		{"/api/v1/audit/verify?head_seq=1", 400, "head_hash"},
		{"/api/v1/audit/verify?head_hash=" + strings.Repeat("0", 64), 400, "head_seq"},
		{"/api/v1/audit/verify?head_seq=1&head_hash=%27%20OR%201=1", 400, "head_hash"},
		{"/api/v1/audit/verify?head_seq=-1&head_hash=" + strings.Repeat("0", 64), 400, "head_seq"},
		{"/api/v1/audit/verify?full=1", 400, "full"},
	}
	for _, tc := range cases {
		t.Run(tc.target[:min(len(tc.target), 60)], func(t *testing.T) {
			t.Parallel()
			e.get(tc.target, e.admin).problem(t, tc.status, tc.field)
		})
	}
}

// SQL metacharacters and LIKE wildcards are plain values: they match
// nothing, and break nothing.
func TestHostileValuesMatchNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ingestOK(e.operator, envelopeJSON("billing", "a", 1, baseTime))
	for _, q := range []string{
		"queue=%27%3B%20DROP%20TABLE%20messages%3B--",
		"queue=billing%27%20OR%20%271%27=%271",
		"job_name=%25",
		"q=%25",
		"q=_",
		"q=%27%22%5C",
		"idempotency_key=%2A",
		"owner=%5Bpayments%5D",
		"q=" + strings.Repeat("%E2%80%AE", 100),
	} {
		if n := e.count(e.viewer, "&"+q); n != 0 {
			t.Fatalf("%s matched %d", q, n)
		}
	}
	if n := e.count(e.viewer, ""); n != 1 {
		t.Fatalf("the store lost its message: %d", n)
	}
}

func TestHostileNewParameters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.ingestOne("billing", "charge", `{"a":1}`)
	for _, tc := range []struct {
		target string
		status int
		field  string
	}{
		{"/api/v1/messages?older_than=soon", 400, "older_than"},
		{"/api/v1/messages?older_than=-5m", 400, "older_than"},
		{"/api/v1/messages?older_than=0s", 400, "older_than"},
		{"/api/v1/messages?older_than=0d", 400, "older_than"},
		{"/api/v1/messages?older_than=36501d", 400, "older_than"},
		{"/api/v1/messages?older_than=99999999999999999999d", 400, "older_than"},
		{"/api/v1/messages?older_than=1d%00", 400, "older_than"},
		{"/api/v1/messages?older_than=1h&older_than=2h", 400, "older_than"},
		{"/api/v1/messages?older_than=1h&failed_before=2026-01-01T00:00:00Z", 400, "older_than"},
		{"/api/v1/messages?" + strings.Repeat("failure_class=permanent&", 101), 400, "failure_class"},
		{"/api/v1/groups?limit=0", 400, "limit"},
		{"/api/v1/groups?cursor=abc", 400, "cursor"},
		{"/api/v1/groups?queue=%ff", 400, "queue"},
		{"/api/v1/groups?status=%27", 400, "status"},
		{"/api/v1/groups?older_than=1y", 400, "older_than"},
		{"/api/v1/queues?limit=5", 400, "limit"},
		{"/api/v1/queues?owner=a%00", 400, "owner"},
		{"/api/v1/queues?failed_after=x", 400, "failed_after"},
		{"/api/v1/audit/export?limit=5", 400, "limit"},
		{"/api/v1/audit/export?actor=%ff", 400, "actor"},
		{"/api/v1/audit/export?before=yesterday", 400, "before"},
		{"/api/v1/messages/" + id + "?x=1", 400, "x"},
		{"/api/v1/messages/" + id + "/versions/%27", 404, "version"},
		{"/api/v1/messages/%27/versions", 404, "id"},
		{"/api/v1/tokens?all=1", 400, "all"},
	} {
		t.Run(tc.target[:min(len(tc.target), 60)], func(t *testing.T) {
			t.Parallel()
			e.forT(t).get(tc.target, e.admin).problem(t, tc.status, tc.field)
		})
	}
}

// TestHostileBodies sends hostile values in every field of every command
// body: each is a 4xx problem naming the field, and changes nothing.
func TestHostileBodies(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withMaxBody(1<<20))
	id := e.ingestOne("billing", "charge", `{"a":1}`)
	ifMatch := []string{"If-Match", `"` + sha([]byte(`{"a":1}`)) + `"`}
	sample, bulk, edit, one, tokens := "/api/v1/messages/sample", "/api/v1/messages/discard",
		"/api/v1/messages/"+id+"/payload", "/api/v1/messages/"+id+"/discard", "/api/v1/tokens"
	long := strings.Repeat("x", 2000)
	many := `["` + strings.Repeat(`a","`, 100) + `a"]`
	manyIDs := `["` + strings.Repeat(id+`","`, quarantine.MaxBulk) + id + `"]`
	cases := []struct {
		method, target, body string
		header               []string
		status               int
		field                string
	}{
		{"POST", sample, `{"filter":"queue=a"}`, nil, 400, "/filter"},
		{"POST", sample, `{"filter":{"queue":"a"}}`, nil, 400, "/filter/queue"},
		{"POST", sample, `{"filter":{"queue":[1]}}`, nil, 400, "/filter/queue/0"},
		{"POST", sample, `{"filter":{"queue":` + many + `}}`, nil, 400, "/filter/queue"},
		{"POST", sample, `{"filter":{"job_name":["a\u0000"]}}`, nil, 400, "/filter/job_name/0"},
		{"POST", sample, `{"filter":{"source":["` + long + `"]}}`, nil, 400, "/filter/source/0"},
		{"POST", sample, `{"filter":{"owner":` + many + `}}`, nil, 400, "/filter/owner"},
		{"POST", sample, `{"filter":{"idempotency_key":[null, {}]}}`, nil, 400, "/filter/idempotency_key/1"},
		{"POST", sample, `{"filter":{"status":["quarantined' OR 1=1"]}}`, nil, 400, "/filter/status/0"},
		{"POST", sample, `{"filter":{"failure_class":["x"]}}`, nil, 400, "/filter/failure_class/0"},
		{"POST", sample, `{"filter":{"failed_after":"2026-13-01T00:00:00Z"}}`, nil, 400, "/filter/failed_after"},
		{"POST", sample, `{"filter":{"failed_before":1700000000}}`, nil, 400, "/filter/failed_before"},
		{"POST", sample, `{"filter":{"older_than":"1e9d"}}`, nil, 400, "/filter/older_than"},
		{"POST", sample, `{"filter":{"q":"` + long + `"}}`, nil, 400, "/filter/q"},
		{"POST", sample, `{"filter":{"cursor":"x"}}`, nil, 400, "/filter/cursor"},
		{"POST", sample, `{"filter":{"limit":5}}`, nil, 400, "/filter/limit"},
		{"POST", sample, `{"filter":{"failed_after":"2026-02-01T00:00:00Z","failed_before":"2026-01-01T00:00:00Z"}}`, nil, 400, "/filter/failed_after"},
		{"POST", sample, `{"size":0}`, nil, 400, "/size"},
		{"POST", sample, `{"size":-1}`, nil, 400, "/size"},
		{"POST", sample, `{"size":1001}`, nil, 400, "/size"},
		{"POST", sample, `{"size":"ten"}`, nil, 400, "/size"},
		{"POST", sample, `{"size":1e99}`, nil, 400, "/size"},
		{"POST", sample, `{"stratify_by":"random"}`, nil, 400, "/stratify_by"},
		{"POST", sample, `{"stratify_by":["queue"]}`, nil, 400, "/stratify_by"},
		{"POST", sample, `{"seed":"42"}`, nil, 400, "/seed"},
		{"POST", sample, `{"seed":1.5}`, nil, 400, "/seed"},
		{"POST", sample, `{"seed":99999999999999999999}`, nil, 400, "/seed"},
		{"POST", sample, `{"Size":5}`, nil, 400, "/Size"},
		{"POST", sample, `{"size":5,"size":6}`, nil, 400, "/size"},
		{"POST", sample, `{"filter":{"queue":["a"],"queue":["b"]}}`, nil, 400, "/filter/queue"},
		{"POST", sample, `{"a/b~c":5}`, nil, 400, "/a~1b~0c"},
		{"POST", sample, `{"size":5}garbage`, nil, 400, ""},
		{"POST", sample, `"sample"`, nil, 400, ""},
		{"POST", sample, `{"size":5`, nil, 400, ""},
		{"POST", sample, `{"size":5,"filter":{"queue":["` + strings.Repeat("y", 1<<20) + `"]}}`, nil, 413, ""},
		{"POST", bulk, `{"reason":"x","ids":["1 OR 1=1"]}`, nil, 400, "/ids/0"},
		{"POST", bulk, `{"reason":"x","ids":[null]}`, nil, 400, "/ids/0"},
		{"POST", bulk, `{"reason":"x","ids":[1]}`, nil, 400, "/ids/0"},
		{"POST", bulk, `{"reason":"x","ids":` + manyIDs + `}`, nil, 400, "/ids"},
		{"POST", bulk, `{"reason":"x","filter":{"queue":["a"]},"expect_count":99999999999999999999}`, nil, 400, "/expect_count"},
		{"POST", bulk, `{"reason":"x","filter":{"queue":["a"]},"expect_count":"1"}`, nil, 400, "/expect_count"},
		{"POST", bulk, `{"reason":"` + long + long + `","ids":["` + id + `"]}`, nil, 422, "/reason"},
		{"POST", bulk, `{"reason":"a\u0000","ids":["` + id + `"]}`, nil, 400, "/reason"},
		{"POST", bulk, `{"reason":["x"],"ids":["` + id + `"]}`, nil, 400, "/reason"},
		{"POST", one, `{"reason":null}`, nil, 422, "/reason"},
		{"POST", one, `{"reason":{"$ne":""}}`, nil, 400, "/reason"},
		{"PUT", edit, `{"payload":1,"reason":"x","content_type":"a\u0000/b"}`, ifMatch, 400, "/content_type"},
		{"PUT", edit, `{"payload":1,"reason":"x","content_type":"application/` + long + `"}`, ifMatch, 400, "/content_type"},
		{"PUT", edit, `{"payload_base64":5,"reason":"x"}`, ifMatch, 400, "/payload_base64"},
		{"PUT", edit, `{"payload":1,"reason":"x"}`, []string{"If-Match", `"` + strings.Repeat("a", 5000) + `"`}, 400, "If-Match"},
		{"PUT", edit, `{"payload":1,"reason":"x"}`, []string{"If-Match", `"` + strings.Repeat("g", 64) + `"`}, 400, "If-Match"},
		{"POST", tokens, `{"name":"x","role":"viewer","owners":["` + strings.Repeat("o", 201) + `"]}`, nil, 400, "/owners/0"},
		{"POST", tokens, `{"name":"x","role":"viewer","owners":["ok","a\u0000"]}`, nil, 400, "/owners/1"},
		{"POST", tokens, `{"name":"x","role":"ADMIN"}`, nil, 400, "/role"},
		{"POST", tokens, `{"name":"<script>","role":"viewer","id":"` + id + `"}`, nil, 400, "/id"},
	}
	for _, tc := range cases {
		r := e.do(tc.method, tc.target, e.admin, []byte(tc.body), tc.header...)
		if r.status >= 500 {
			t.Fatalf("%s %s %s: %d", tc.method, tc.target, clip(tc.body), r.status)
		}
		r.problem(t, tc.status, tc.field)
	}
	if m := e.message(id, e.viewer); m.Status != quarantine.StatusQuarantined || m.PayloadVersion != 1 {
		t.Fatalf("a hostile request changed the message: %+v", m.Message)
	}
	var list struct{ Items []tokenJSON }
	e.get("/api/v1/tokens", e.admin).want(t, http.StatusOK).decode(t, &list)
	if len(list.Items) != 3 {
		t.Fatalf("a hostile request created a token")
	}
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// SQL metacharacters and wildcards in the filters of the new routes match
// nothing and break nothing.
func TestHostileValuesNewRoutes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ingestOK(e.operator, envelopeJSON("billing", "a", 1, baseTime))
	for _, q := range []string{"queue=%27%3B%20DROP%20TABLE%20messages%3B--", "job_name=%25", "q=_", "owner=%5Bpayments%5D"} {
		for _, target := range []string{"/api/v1/groups?", "/api/v1/queues?"} {
			var l struct{ Items []json.RawMessage }
			e.get(target+q, e.viewer).want(t, http.StatusOK).decode(t, &l)
			if len(l.Items) != 0 {
				t.Fatalf("%s%s matched %d", target, q, len(l.Items))
			}
		}
	}
	for _, f := range []map[string]any{{"queue": []string{"' OR 1=1 --"}}, {"q": "%"}, {"idempotency_key": []string{"*"}}} {
		if s := e.sample(e.viewer, map[string]any{"filter": f, "size": 10}); len(s.Items) != 0 {
			t.Fatalf("%v sampled %d", f, len(s.Items))
		}
		var res bulkJSON
		e.json(http.MethodPost, "/api/v1/messages/discard", e.operator, map[string]any{"filter": f, "reason": "hostile"}).
			want(t, http.StatusOK).decode(t, &res)
		if len(res.Changed) != 0 {
			t.Fatalf("%v discarded %d", f, len(res.Changed))
		}
	}
	if n := e.count(e.viewer, "&status=quarantined"); n != 1 {
		t.Fatalf("the store lost its message: %d", n)
	}
}

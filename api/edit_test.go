package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
	"github.com/quarantine-dev/quarantine/internal/rules"
)

type version struct {
	MessageID  string `json:"message_id"`
	Version    int    `json:"version"`
	SHA256     string `json:"sha256"`
	PrevSHA256 string `json:"prev_sha256"`
	Size       int    `json:"size"`
	Actor      string `json:"actor"`
	Reason     string `json:"reason"`
}

func (e *env) versions(id, secret string) []version {
	e.t.Helper()
	var l struct{ Items []version }
	e.get("/api/v1/messages/"+id+"/versions", secret).want(e.t, http.StatusOK).decode(e.t, &l)
	return l.Items
}

// edit sends PUT …/payload with If-Match "sha".
func (e *env) edit(id, secret, sha string, body any) *resp {
	e.t.Helper()
	return e.json(http.MethodPut, "/api/v1/messages/"+id+"/payload", secret, body, "If-Match", `"`+sha+`"`)
}

// TestEditChain edits a payload three times: each version's old SHA-256
// is the one before it, the first is the ingested one, the idempotency key
// never changes, and every edit is audited with both hashes.
func TestEditChain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.ingestOne("billing", "charge", `{"amount":1}`)
	orig := e.message(id, e.viewer)
	ingested := orig.PayloadSHA256
	shas := []string{ingested}
	for i := 2; i <= 4; i++ {
		payload := `{"amount":` + strconv.Itoa(i) + `}` // compact: json.Marshal compacts a RawMessage
		r := e.edit(id, e.operator, shas[len(shas)-1], map[string]any{"payload": json.RawMessage(payload), "reason": "fix " + strconv.Itoa(i)})
		r.want(t, http.StatusOK)
		var m message
		r.decode(t, &m)
		if m.PayloadSHA256 != sha([]byte(payload)) || r.header.Get("ETag") != `"`+m.PayloadSHA256+`"` || m.PayloadVersion != i {
			t.Fatalf("edit %d: sha %s etag %s version %d", i, m.PayloadSHA256, r.header.Get("ETag"), m.PayloadVersion)
		}
		if string(m.payloadBytes(t)) != payload || m.IdempotencyKey != orig.IdempotencyKey {
			t.Fatalf("edit %d: payload %s key %q (was %q)", i, m.Payload, m.IdempotencyKey, orig.IdempotencyKey)
		}
		shas = append(shas, m.PayloadSHA256)
	}
	vs := e.versions(id, e.viewer)
	if len(vs) != 4 {
		t.Fatalf("%d versions, want 4", len(vs))
	}
	for i, v := range vs {
		want := ""
		if i > 0 {
			want = vs[i-1].SHA256
		}
		if v.Version != i+1 || v.SHA256 != shas[i] || v.PrevSHA256 != want {
			t.Fatalf("version %d: %+v, want sha %s prev %q", i+1, v, shas[i], want)
		}
		if i > 0 && (v.Actor != "token:operator" || v.Reason != "fix "+strconv.Itoa(i+1)) {
			t.Fatalf("version %d: actor %q reason %q", i+1, v.Actor, v.Reason)
		}
		var one message
		e.get("/api/v1/messages/"+id+"/versions/"+strconv.Itoa(i+1), e.viewer).want(t, http.StatusOK).decode(t, &one)
		if sha(one.payloadBytes(t)) != shas[i] {
			t.Fatalf("version %d bytes do not hash to %s", i+1, shas[i])
		}
	}
	var audit struct{ Items []auditEvent }
	e.get("/api/v1/audit?action=message.edit&message="+id, e.admin).want(t, http.StatusOK).decode(t, &audit)
	if len(audit.Items) != 3 {
		t.Fatalf("%d edit events, want 3", len(audit.Items))
	}
	for i, ev := range audit.Items {
		var d struct {
			Old    string `json:"old_sha256"`
			New    string `json:"new_sha256"`
			Reason string `json:"reason"`
		}
		_ = json.Unmarshal(ev.Details, &d)
		if d.Old != shas[i] || d.New != shas[i+1] || ev.Actor != "token:operator" || d.Reason == "" {
			t.Fatalf("event %d: %+v %+v", i, ev, d)
		}
	}
	if m := e.message(id, e.viewer); m.IdempotencyKey != orig.IdempotencyKey {
		t.Fatalf("key changed: %q", m.IdempotencyKey)
	}
}

// TestEditConcurrent sends the same edit base from many clients: exactly
// one wins, the others are told their If-Match is stale.
func TestEditConcurrent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.ingestOne("billing", "charge", `{"amount":1}`)
	base := e.message(id, e.viewer).PayloadSHA256
	const n = 8
	var wg sync.WaitGroup
	results := make([]*resp, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := []byte(`{"payload":{"amount":` + strconv.Itoa(100+i) + `},"reason":"race"}`)
			results[i], errs[i] = e.send(http.MethodPut, "/api/v1/messages/"+id+"/payload", e.operator, body, "If-Match", `"`+base+`"`)
		}()
	}
	wg.Wait()
	won := 0
	for i, r := range results {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		checkResponse(t, r.req, r)
		switch r.status {
		case http.StatusOK:
			won++
		case http.StatusPreconditionFailed:
			r.problem(t, http.StatusPreconditionFailed, "If-Match")
		default:
			t.Fatalf("status %d: %s", r.status, r.body)
		}
	}
	if won != 1 {
		t.Fatalf("%d edits won, want exactly 1", won)
	}
	if vs := e.versions(id, e.viewer); len(vs) != 2 || vs[1].PrevSHA256 != base {
		t.Fatalf("versions %+v", vs)
	}
}

// TestEditConcurrentNoOp races 20 edits that send the current payload
// with the current If-Match: a no-op edit is refused (422 naming
// /payload), so none wins and no version is added. Then 20 identical
// real edits with the same If-Match: exactly one 200, the others 412, and
// the version count grows by one.
func TestEditConcurrentNoOp(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.ingestOne("billing", "charge", `{"amount":1}`)
	base := e.message(id, e.viewer).PayloadSHA256
	race := func(payload string) map[int]int {
		const n = 20
		var wg sync.WaitGroup
		results := make([]*resp, n)
		errs := make([]error, n)
		body := []byte(`{"payload":` + payload + `,"reason":"race"}`)
		for i := range n {
			wg.Go(func() {
				results[i], errs[i] = e.send(http.MethodPut, "/api/v1/messages/"+id+"/payload", e.operator, body, "If-Match", `"`+base+`"`)
			})
		}
		wg.Wait()
		counts := map[int]int{}
		for i, r := range results {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			checkResponse(t, r.req, r)
			counts[r.status]++
			switch r.status {
			case http.StatusUnprocessableEntity:
				r.problem(t, r.status, "/payload")
			case http.StatusPreconditionFailed:
				r.problem(t, r.status, "If-Match")
			}
		}
		return counts
	}
	if c := race(`{"amount":1}`); c[http.StatusUnprocessableEntity] != 20 {
		t.Fatalf("no-op race answered %v, want 20 × 422", c)
	}
	if vs := e.versions(id, e.viewer); len(vs) != 1 {
		t.Fatalf("%d versions after no-op edits, want 1", len(vs))
	}
	if c := race(`{"amount":2}`); c[http.StatusOK] != 1 || c[http.StatusPreconditionFailed] != 19 {
		t.Fatalf("real race answered %v, want 1 × 200 and 19 × 412", c)
	}
	if vs := e.versions(id, e.viewer); len(vs) != 2 || vs[1].PrevSHA256 != base {
		t.Fatalf("versions %+v", vs)
	}
}

// writeSchema writes a JSON Schema file and compiles it.
func writeSchema(t *testing.T, schema string) *rules.Schema {
	t.Helper()
	p := filepath.Join(t.TempDir(), "schema.json")
	if err := os.WriteFile(p, []byte(schema), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := rules.CompileSchema(p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestEditRefusals checks every refusal of an edit, in the order the
// route checks them; none changes the payload.
func TestEditRefusals(t *testing.T) {
	t.Parallel()
	schema := writeSchema(t, `{"type":"object","required":["amount"],"properties":{"amount":{"type":"number","minimum":0},"lines":{"type":"array","items":{"type":"string"}}}}`)
	prep := &collect.Preparer{Owners: owners, Idempotency: []collect.IdempotencyRule{{Queues: []string{"orders.*"}, JSONPointer: "/order_id", Prefix: "order:"}}}
	e := newEnv(t, withPreparer(prep), withSchemas(map[string]*rules.Schema{"charge": schema}))
	// The key comes from the payload: order:7.
	keyed := e.ingestOK(e.admin, []byte(`{"envelope":"quarantine.failure/v1","job":{"name":"ship","queue":"orders.eu","payload":{"order_id":7,"x":1}}}`)).Items[0].ID
	if k := e.message(keyed, e.viewer).IdempotencyKey; k != "order:7" {
		t.Fatalf("key %q", k)
	}
	charge := e.ingestOne("billing", "charge", `{"amount":1}`)
	bin := e.ingestOK(e.admin, []byte(`{"envelope":"quarantine.failure/v1","job":{"name":"j","queue":"billing","idempotency_key":"b","payload_base64":"AAEC"}}`)).Items[0].ID
	replaying := &quarantine.Message{Source: "test", Queue: "billing", JobName: "j", Owner: "payments", IdempotencyKey: "r",
		Payload: []byte(`{}`), ContentType: "application/json", Status: quarantine.StatusReplaying}
	if _, err := e.store.InsertBatch(context.Background(), []*quarantine.Message{replaying}); err != nil {
		t.Fatal(err)
	}
	shaOf := func(id string) string { return e.message(id, e.viewer).PayloadSHA256 }
	ok := map[string]any{"payload": map[string]any{"amount": 2}, "reason": "fix"}
	put := func(id string, header []string, body any) *resp {
		return e.json(http.MethodPut, "/api/v1/messages/"+id+"/payload", e.operator, body, header...)
	}
	cases := []struct {
		name   string
		id     string
		header []string // nil: If-Match with the current sha
		body   any
		status int
		field  string
	}{
		{"no If-Match", charge, []string{}, ok, 428, "If-Match"},
		{"If-Match unquoted", charge, []string{"If-Match", shaOf(charge)}, ok, 400, "If-Match"},
		{"If-Match star", charge, []string{"If-Match", "*"}, ok, 400, "If-Match"},
		{"If-Match weak", charge, []string{"If-Match", `W/"` + shaOf(charge) + `"`}, ok, 400, "If-Match"},
		{"If-Match list", charge, []string{"If-Match", `"` + shaOf(charge) + `", "` + shaOf(bin) + `"`}, ok, 400, "If-Match"},
		{"If-Match uppercase", charge, []string{"If-Match", `"` + strings.ToUpper(shaOf(charge)) + `"`}, ok, 400, "If-Match"},
		{"stale If-Match", charge, []string{"If-Match", `"` + sha([]byte("other")) + `"`}, ok, 412, "If-Match"},
		{"no reason", charge, nil, map[string]any{"payload": 1}, 422, "/reason"},
		{"blank reason", charge, nil, map[string]any{"payload": 1, "reason": " \n\t"}, 422, "/reason"},
		{"long reason", charge, nil, map[string]any{"payload": 1, "reason": strings.Repeat("r", 2001)}, 422, "/reason"},
		{"NUL in reason", charge, nil, map[string]any{"payload": 1, "reason": "a\x00b"}, 400, "/reason"},
		{"no payload", charge, nil, map[string]any{"reason": "x"}, 400, "/payload"},
		{"both payloads", charge, nil, map[string]any{"payload": 1, "payload_base64": "AA==", "reason": "x"}, 400, "/payload_base64"},
		{"bad base64", charge, nil, map[string]any{"payload_base64": "%%%", "reason": "x"}, 400, "/payload_base64"},
		{"unpadded base64", charge, nil, map[string]any{"payload_base64": "AA", "reason": "x"}, 400, "/payload_base64"},
		{"bad content type", charge, nil, map[string]any{"payload": 1, "content_type": "a b/c", "reason": "x"}, 400, "/content_type"},
		{"unknown field", charge, nil, map[string]any{"payload": 1, "reason": "x", "actor": "root"}, 400, "/actor"},
		{"reason a number", charge, nil, []byte(`{"payload":1,"reason":5}`), 400, "/reason"},
		{"body an array", charge, nil, []byte(`[{"payload":1,"reason":"x"}]`), 400, ""},
		{"body not JSON", charge, nil, []byte(`{"payload":`), 400, ""},
		{"trailing data", charge, nil, []byte(`{"payload":1,"reason":"x"} {}`), 400, ""},
		{"unknown message", quarantine.NewID(baseTime), []string{"If-Match", `"` + sha(nil) + `"`}, ok, 404, "id"},
		{"replaying", replaying.ID, []string{"If-Match", `"` + replaying.PayloadSHA256 + `"`}, ok, 409, ""},
		{"key change", keyed, nil, map[string]any{"payload": map[string]any{"order_id": 8, "x": 1}, "reason": "x"}, 422, "/payload"},
		{"key removed", keyed, nil, map[string]any{"payload": map[string]any{"x": 1}, "reason": "x"}, 422, "/payload"},
		{"schema: not JSON", charge, nil, map[string]any{"payload_base64": "AP8=", "reason": "x"}, 422, "/payload"},
		{"schema: violations", charge, nil, map[string]any{"payload": map[string]any{"amount": -1, "lines": []any{"a", 2}}, "reason": "x"}, 422, "/payload"},
		{"schema: missing member", charge, nil, map[string]any{"payload": map[string]any{}, "reason": "x"}, 422, "/payload"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			header := tc.header
			if header == nil {
				header = []string{"If-Match", `"` + shaOf(tc.id) + `"`}
			}
			before := shaOf2(e, tc.id)
			r := put(tc.id, header, tc.body)
			p := r.problem(t, tc.status, tc.field)
			if after := shaOf2(e, tc.id); after != before {
				t.Fatalf("a refused edit changed the payload")
			}
			if tc.name == "schema: violations" {
				want := map[string]bool{"/amount": true, "/lines/1": true}
				if len(p.Violations) != 2 || !want[p.Violations[0].Pointer] || !want[p.Violations[1].Pointer] || p.Violations[0].Detail == "" {
					t.Fatalf("violations %+v", p.Violations)
				}
			}
			if tc.name == "schema: missing member" && (len(p.Violations) != 1 || p.Violations[0].Pointer != "") {
				t.Fatalf("violations %+v", p.Violations)
			}
		})
	}
	// The viewer may not edit at all: 403, audited.
	e.edit(charge, e.viewer, shaOf(charge), ok).problem(t, http.StatusForbidden, "")
	if d := e.deniedTo("viewer"); len(d) != 1 {
		t.Fatalf("viewer denials %+v", d)
	}
}

// shaOf2 reads the stored hash directly, so that it works for any message.
func shaOf2(e *env, id string) string {
	m, err := e.store.GetMessage(context.Background(), id)
	if err != nil {
		return ""
	}
	return m.PayloadSHA256
}

// TestEditAccepted checks the edits that pass the checks: one keeping the
// key a rule reads from the payload, one satisfying the schema, and a
// JSON payload given for a binary message, which becomes application/json.
func TestEditAccepted(t *testing.T) {
	t.Parallel()
	schema := writeSchema(t, `{"type":"object","required":["amount"]}`)
	prep := &collect.Preparer{Owners: owners, Idempotency: []collect.IdempotencyRule{{Queues: []string{"orders.*"}, JSONPointer: "/order_id", Prefix: "order:"}}}
	e := newEnv(t, withPreparer(prep), withSchemas(map[string]*rules.Schema{"charge": schema}))
	keyed := e.ingestOK(e.admin, []byte(`{"envelope":"quarantine.failure/v1","job":{"name":"ship","queue":"orders.eu","payload":{"order_id":7,"x":1}}}`)).Items[0].ID
	charge := e.ingestOne("billing", "charge", `{"amount":1}`)
	bin := e.ingestOK(e.admin, []byte(`{"envelope":"quarantine.failure/v1","job":{"name":"j","queue":"billing","idempotency_key":"b","payload_base64":"AAEC"}}`)).Items[0].ID
	for _, tc := range []struct {
		id   string
		body string
		ct   string
	}{
		{keyed, `{"order_id":7,"x":2}`, "application/json"},
		{charge, `{"amount":5,"note":"ok"}`, "application/json"},
		{bin, `{"now":"json"}`, "application/json"},
	} {
		before := e.message(tc.id, e.viewer)
		r := e.edit(tc.id, e.operator, before.PayloadSHA256, []byte(`{"reason":"fix","payload":`+tc.body+`}`)).want(t, http.StatusOK)
		var m message
		r.decode(t, &m)
		if string(m.payloadBytes(t)) != tc.body || m.ContentType != tc.ct || m.IdempotencyKey != before.IdempotencyKey {
			t.Fatalf("%s: payload %s content type %q key %q", tc.id, m.Payload, m.ContentType, m.IdempotencyKey)
		}
	}
	// Bytes stay bytes: base64 in, the same bytes out.
	before := e.message(bin, e.viewer)
	r := e.edit(bin, e.admin, before.PayloadSHA256, map[string]any{"reason": "bytes", "payload_base64": "AP8=", "content_type": "application/octet-stream"}).want(t, http.StatusOK)
	var m message
	r.decode(t, &m)
	if string(m.payloadBytes(t)) != "\x00\xff" || m.ContentType != "application/octet-stream" {
		t.Fatalf("binary edit: %q %q", m.payloadBytes(t), m.ContentType)
	}
}

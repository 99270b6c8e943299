package api_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/api"
)

func TestValidatePointer(t *testing.T) {
	t.Parallel()
	for p, ok := range map[string]bool{
		"/card/number": true, "/a~1b/~0c": true, "/items/0": true, "/": true,
		"": false, "card": false, "/a~": false, "/a~2": false, "/\x00": false, "/\xff": false,
	} {
		if err := api.ValidatePointer(p); (err == nil) != ok {
			t.Errorf("ValidatePointer(%q) = %v, want ok=%v", p, err, ok)
		}
	}
}

// TestRedaction: viewers see "<redacted>" at the configured pointers of
// every payload they are shown; operators and admins see the values; the
// stored payload, which replays use, is untouched.
func TestRedaction(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withRedact("/card/number", "/items/1/secret", "/a~1b", "/missing/x"))
	payload := `{"card": {"number": "4111111111111111", "cvc": "123"}, "items": [{"secret": "keep"}, {"secret": "s3"}], "a/b": 5, "note": "<b>"}`
	id := e.ingestOne("billing", "charge", payload)
	// JSON bytes under a non-JSON content type are masked too, then shown as base64.
	plain := e.ingestOK(e.admin, []byte(`{"envelope":"quarantine.failure/v1","job":{"name":"j","queue":"billing","idempotency_key":"p",`+
		`"payload_base64":"`+base64.StdEncoding.EncodeToString([]byte(`{"card":{"number":"5500"}}`))+`","content_type":"text/plain"}}`)).Items[0].ID
	untouched := e.ingestOne("billing", "charge", `{"other": 1}`)
	scopedViewer := e.token("payments-viewer", quarantine.RoleViewer, "payments")

	decode := func(r *resp) (map[string]any, bool) {
		t.Helper()
		var m message
		r.want(t, http.StatusOK).decode(t, &m)
		var v map[string]any
		if err := json.Unmarshal(m.payloadBytes(t), &v); err != nil {
			t.Fatalf("payload %s: %v", m.payloadBytes(t), err)
		}
		var raw map[string]json.RawMessage
		r.decode(t, &raw)
		return v, string(raw["payload_redacted"]) == "true"
	}
	for _, secret := range []string{e.viewer, scopedViewer} {
		for _, target := range []string{"/api/v1/messages/" + id, "/api/v1/messages/" + id + "/versions/1"} {
			v, redacted := decode(e.get(target, secret))
			card := v["card"].(map[string]any)
			items := v["items"].([]any)
			if !redacted || card["number"] != "<redacted>" || card["cvc"] != "123" || v["a/b"] != "<redacted>" ||
				items[1].(map[string]any)["secret"] != "<redacted>" || items[0].(map[string]any)["secret"] != "keep" || v["note"] != "<b>" {
				t.Fatalf("viewer sees %v (redacted %v) at %s", v, redacted, target)
			}
		}
		v, redacted := decode(e.get("/api/v1/messages/"+plain, secret))
		if !redacted || v["card"].(map[string]any)["number"] != "<redacted>" {
			t.Fatalf("text/plain JSON: %v", v)
		}
		r := e.get("/api/v1/messages/"+untouched, secret)
		if _, redacted := decode(r); redacted || !bytes.Contains(r.body, []byte(`"payload":{"other": 1}`)) {
			t.Fatalf("a payload without redacted values must be shown byte-exact: %s", r.body)
		}
	}
	for _, secret := range []string{e.operator, e.admin} {
		r := e.get("/api/v1/messages/"+id, secret)
		if _, redacted := decode(r); redacted || !bytes.Contains(r.body, []byte(payload)) {
			t.Fatalf("operators and admins see the payload byte-exact: %s", r.body)
		}
	}
	stored, err := e.store.GetMessage(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if string(stored.Payload) != payload || stored.PayloadSHA256 != sha([]byte(payload)) {
		t.Fatalf("the stored payload changed: %s", stored.Payload)
	}
	// The ETag is the stored payload's, whoever reads.
	if r := e.get("/api/v1/messages/"+id, e.viewer); r.header.Get("ETag") != `"`+sha([]byte(payload))+`"` {
		t.Fatalf("ETag %q", r.header.Get("ETag"))
	}
}

// TestRedactionRefusesViewerSearch: while payload fields are redacted, a
// viewer's text search could find the hidden values by guessing, so it is
// refused (403, audited) on every route that takes q; operators search.
func TestRedactionRefusesViewerSearch(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withRedact("/card/number"))
	e.ingestOne("billing", "charge", `{"card": {"number": "4111111111111111"}}`)
	before := len(e.denials())
	routes := []struct{ method, target, body string }{
		{http.MethodGet, "/api/v1/messages?q=4111", ""},
		{http.MethodGet, "/api/v1/groups?q=4111", ""},
		{http.MethodGet, "/api/v1/queues?q=4111", ""},
		{http.MethodPost, "/api/v1/messages/sample", `{"filter":{"q":"4111"},"size":5,"seed":1}`},
	}
	for _, rt := range routes {
		var body []byte
		if rt.body != "" {
			body = []byte(rt.body)
		}
		e.do(rt.method, rt.target, e.viewer, body).want(t, http.StatusForbidden)
		e.do(rt.method, rt.target, e.operator, body).want(t, http.StatusOK)
	}
	if got := len(e.denials()) - before; got != len(routes) {
		t.Fatalf("%d denials audited, want %d", got, len(routes))
	}
	if n := e.count(e.operator, "&q=4111"); n != 1 {
		t.Fatalf("operator search found %d", n)
	}
	e.get("/api/v1/messages", e.viewer).want(t, http.StatusOK)
}

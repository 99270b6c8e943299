package api_test

import (
	"net/http"
	"testing"

	"github.com/quarantine-dev/quarantine"
)

// TestUnsupportedMediaType sends every JSON endpoint a valid JSON body
// labelled as something else: each answers 415 naming Content-Type, as
// openapi.yaml documents, and nothing is stored.
func TestUnsupportedMediaType(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.ingestOne("billing", "charge", `{"amount":1}`)
	sha := e.message(id, e.viewer).PayloadSHA256
	edit := []string{"If-Match", `"` + sha + `"`}
	routes := []struct {
		method, path, body string
		header             []string
	}{
		{"POST", "/api/v1/ingest", string(envelopeJSON("billing", "charge", 1, baseTime)), nil},
		{"POST", "/api/v1/messages/sample", `{"size":1}`, nil},
		{"POST", "/api/v1/messages/discard", `{"reason":"x","ids":["` + id + `"]}`, nil},
		{"POST", "/api/v1/messages/" + id + "/discard", `{"reason":"x"}`, nil},
		{"PUT", "/api/v1/messages/" + id + "/payload", `{"payload":{"amount":2},"reason":"x"}`, edit},
		{"POST", "/api/v1/replays", `{"ids":["` + id + `"],"reason":"x","dry_run":true}`, nil},
		{"POST", "/api/v1/tokens", `{"name":"x","role":"viewer"}`, nil},
	}
	types := []string{"text/plain", "application/x-www-form-urlencoded", "application/xml", "text/xml",
		"multipart/form-data; boundary=x", "", "application/json; charset=iso-8859-1", "json"}
	for _, rt := range routes {
		for _, ct := range types {
			r := e.do(rt.method, rt.path, e.admin, []byte(rt.body), append([]string{"Content-Type", ct}, rt.header...)...)
			r.problem(t, http.StatusUnsupportedMediaType, "Content-Type")
		}
	}
	// Nothing happened: one message, unchanged, no token, no replay.
	if n := e.count(e.viewer, ""); n != 1 {
		t.Fatalf("%d messages after refused ingests, want 1", n)
	}
	if m := e.message(id, e.viewer); m.Status != quarantine.StatusQuarantined || m.PayloadSHA256 != sha {
		t.Fatalf("a refused request changed the message: %s %s", m.Status, m.PayloadSHA256)
	}
	var list struct{ Items []tokenJSON }
	if e.get("/api/v1/tokens", e.admin).want(t, http.StatusOK).decode(t, &list); len(list.Items) != 3 {
		t.Fatalf("%d tokens after refused creations, want 3", len(list.Items))
	}
	// JSON types with a parameter or a +json suffix are JSON.
	for _, ct := range []string{"application/json; charset=utf-8", "application/JSON", "application/problem+json"} {
		e.do("POST", "/api/v1/messages/sample", e.viewer, []byte(`{"size":1}`), "Content-Type", ct).want(t, http.StatusOK)
	}
}

// TestHeadLikeGet: HEAD on a GET route answers what GET answers, the
// status and the headers, without a body.
func TestHeadLikeGet(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.ingestOne("billing", "charge", `{"amount":1}`)
	for _, c := range []struct {
		path, secret string
	}{
		{"/healthz", ""},
		{"/api/v1/messages", e.viewer},
		{"/api/v1/messages/" + id, e.viewer},
		{"/api/v1/messages/" + id + "/versions", e.viewer},
		{"/api/v1/messages/" + id + "/versions/1", e.viewer},
		{"/api/v1/messages/" + quarantine.NewID(baseTime), e.viewer}, // 404
		{"/api/v1/messages?limit=0", e.viewer},                       // 400
		{"/api/v1/messages", ""},                                     // 401
		{"/api/v1/tokens", e.viewer},                                 // 403
		{"/api/v1/audit/verify", e.admin},
		{"/api/v1/groups", e.viewer},
	} {
		get := e.get(c.path, c.secret) // validated against openapi.yaml
		head, err := e.send(http.MethodHead, c.path, c.secret, nil)
		if err != nil {
			t.Fatal(err)
		}
		if head.status != get.status || len(head.body) != 0 {
			t.Fatalf("HEAD %s: %d with %d body bytes; GET answered %d", c.path, head.status, len(head.body), get.status)
		}
		for _, h := range []string{"Content-Type", "ETag", "Cache-Control", "Vary", "WWW-Authenticate"} {
			if head.header.Get(h) != get.header.Get(h) {
				t.Fatalf("HEAD %s: %s %q, GET sent %q", c.path, h, head.header.Get(h), get.header.Get(h))
			}
		}
		if head.header.Get("X-Request-Id") == "" {
			t.Fatalf("HEAD %s: no X-Request-Id", c.path)
		}
	}
	// A route without GET still refuses HEAD, and says GET is not there either.
	r, err := e.send(http.MethodHead, "/api/v1/ingest", e.admin, nil)
	if err != nil || r.status != http.StatusMethodNotAllowed || r.header.Get("Allow") != "POST" {
		t.Fatalf("HEAD on ingest: %v %d Allow %q", err, r.status, r.header.Get("Allow"))
	}
}

// TestMalformedLimits: an empty limit or one with a sign is refused like
// any other malformed limit, on every paged route.
func TestMalformedLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.ingestOne("billing", "charge", `{"amount":1}`)
	c := e.createReplay(e.operator, map[string]any{"ids": []string{id}, "reason": "r", "dry_run": true})
	for _, path := range []string{"/api/v1/messages", "/api/v1/groups", "/api/v1/replays", "/api/v1/audit",
		"/api/v1/replays/" + c.Replay.ID + "/items"} {
		for _, q := range []string{"limit=", "limit=%2B5", "limit=+5", "limit=-5", "limit=5x", "limit=0x5", "limit=%205"} {
			e.get(path+"?"+q, e.admin).problem(t, http.StatusBadRequest, "limit")
		}
		e.get(path+"?limit=5", e.admin).want(t, http.StatusOK)
	}
	e.get("/api/v1/audit?cursor=", e.admin).problem(t, http.StatusBadRequest, "cursor")
}

// TestProblemFieldNamesElement: a refusal of one element of an array
// names that element.
func TestProblemFieldNamesElement(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.ingestOne("billing", "charge", `{"amount":1}`)
	for _, c := range []struct{ path, body, field string }{
		{"/api/v1/messages/discard", `{"reason":"x","ids":["` + id + `",5]}`, "/ids/1"},
		{"/api/v1/messages/discard", `{"reason":"x","ids":["` + id + `","nope"]}`, "/ids/1"},
		{"/api/v1/messages/discard", `{"reason":"x","ids":[["` + id + `"]]}`, "/ids/0"},
		{"/api/v1/messages/discard", `{"reason":"x","filter":{"status":["quarantined","gone"]}}`, "/filter/status/1"},
		{"/api/v1/messages/sample", `{"filter":{"queue":["a",{"b":1}]}}`, "/filter/queue/1"},
		{"/api/v1/messages/sample", `{"filter":{"failure_class":["permanent","nope"]}}`, "/filter/failure_class/1"},
		{"/api/v1/messages/sample", `{"filter":{"queue":["a","b\u0000"]}}`, "/filter/queue/1"},
		{"/api/v1/replays", `{"reason":"x","ids":["` + id + `",true]}`, "/ids/1"},
		{"/api/v1/replays", `{"reason":"x","filter":{"status":["gone"]},"dry_run":true}`, "/filter/status/0"},
		{"/api/v1/tokens", `{"name":"x","role":"viewer","owners":["a",""]}`, "/owners/1"},
	} {
		e.json(http.MethodPost, c.path, e.admin, []byte(c.body)).problem(t, http.StatusBadRequest, c.field)
	}
}

// TestPayloadAnswersNotStored: what carries a payload (and, as every
// authenticated answer, what a token reads) is sent with
// Cache-Control: no-store.
func TestPayloadAnswersNotStored(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.ingestOne("billing", "charge", `{"amount":1}`)
	c := e.createReplay(e.operator, map[string]any{"ids": []string{id}, "reason": "r", "dry_run": true})
	for _, path := range []string{"/api/v1/messages/" + id, "/api/v1/messages/" + id + "/versions/1",
		"/api/v1/replays/" + c.Replay.ID + "/report", "/api/v1/messages", "/api/v1/audit"} {
		r := e.get(path, e.admin).want(t, http.StatusOK)
		if r.header.Get("Cache-Control") != "no-store" {
			t.Fatalf("GET %s: Cache-Control %q, want no-store", path, r.header.Get("Cache-Control"))
		}
	}
	r := e.do(http.MethodGet, "/api/v1/messages/"+id, e.viewer, nil, "If-None-Match", e.get("/api/v1/messages/"+id, e.viewer).header.Get("ETag"))
	if r.status != http.StatusNotModified || r.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("304: %d Cache-Control %q", r.status, r.header.Get("Cache-Control"))
	}
}

// TestStrictBodies: a body is decoded strictly, and the refusal names the
// member: a name in another case is unknown (not matched to the field),
// a member given twice is refused (not the last one kept), an unknown
// member of a nested object is named below it, and nothing may follow
// the object. Nothing is discarded by any of them.
func TestStrictBodies(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.ingestOne("billing", "charge", `{"amount":1}`)
	for _, c := range []struct{ path, body, field string }{
		{"/api/v1/messages/discard", `{"Reason":"x","ids":["` + id + `"]}`, "/Reason"},
		{"/api/v1/messages/discard", `{"reason":"x","reason":"y","ids":["` + id + `"]}`, "/reason"},
		{"/api/v1/messages/discard", `{"reason":"x","filter":{"queue":["billing"],"nope":1}}`, "/filter/nope"},
		{"/api/v1/messages/discard", `{"reason":"x","ids":["` + id + `"]} {}`, ""},
		{"/api/v1/messages/discard", `{"reason":"x","ids":["` + id + `"]`, ""},
		{"/api/v1/replays", `{"reason":"x","ids":["` + id + `"],"destination":{"queue":"a","Queue":"b"}}`, "/destination/Queue"},
	} {
		e.json(http.MethodPost, c.path, e.admin, []byte(c.body)).problem(t, http.StatusBadRequest, c.field)
	}
	var m struct {
		Status string `json:"status"`
	}
	e.get("/api/v1/messages/"+id, e.viewer).want(t, http.StatusOK).decode(t, &m)
	if m.Status != "quarantined" {
		t.Fatalf("a refused body changed the message: %s", m.Status)
	}
}

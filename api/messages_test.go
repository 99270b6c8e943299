package api_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
)

type page struct {
	Items      []map[string]json.RawMessage `json:"items"`
	NextCursor *string                      `json:"next_cursor"`
}

func (e *env) page(target, secret string) page {
	e.t.Helper()
	r := e.get(target, secret)
	if r.status != http.StatusOK {
		e.t.Fatalf("%s: %d %s", target, r.status, clipBody(r.body))
	}
	var p page
	r.decode(e.t, &p)
	return p
}

func TestListPagesNewestFirst(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var elems [][]byte
	for i := range 7 {
		elems = append(elems, envelopeJSON("orders.x", "job", i, baseTime.Add(time.Duration(i)*time.Minute)))
	}
	e.ingestOK(e.operator, array(elems...))

	var seen []string
	target := "/api/v1/messages?limit=3"
	for pages := 0; ; pages++ {
		p := e.page(target, e.viewer)
		for _, it := range p.Items {
			if _, ok := it["payload"]; ok {
				t.Fatal("list items must not carry the payload")
			}
			if string(it["payload_size"]) != "7" {
				t.Fatalf("payload_size %s", it["payload_size"])
			}
			var id string
			_ = json.Unmarshal(it["id"], &id)
			seen = append(seen, id)
		}
		if p.NextCursor == nil {
			break
		}
		if pages > 5 {
			t.Fatal("too many pages")
		}
		target = "/api/v1/messages?limit=3&cursor=" + url.QueryEscape(*p.NextCursor)
	}
	if len(seen) != 7 {
		t.Fatalf("paged through %d messages, want 7", len(seen))
	}
	// Newest failure first.
	var first, last map[string]any
	r := e.get("/api/v1/messages/"+seen[0], e.viewer)
	r.decode(t, &first)
	e.get("/api/v1/messages/"+seen[6], e.viewer).decode(t, &last)
	if first["failed_at"] != baseTime.Add(6*time.Minute).Format(time.RFC3339) || last["failed_at"] != baseTime.Format(time.RFC3339) {
		t.Fatalf("order: first %v last %v", first["failed_at"], last["failed_at"])
	}
}

func TestListFilters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ingestOK(e.operator, array(
		envelopeJSON("billing", "invoice", 1, baseTime),
		envelopeJSON("billing", "refund", 2, baseTime.Add(time.Hour)),
		envelopeJSON("orders.x", "invoice", 3, baseTime.Add(2*time.Hour)),
		[]byte(`{"envelope":"quarantine.failure/v1","job":{"name":"x","queue":"orders.x","payload":1},"failure":{"class":"permanent","reason":"card declined","failed_at":"2026-11-29T11:00:00Z"}}`),
	))
	cases := []struct {
		query string
		want  int
	}{
		{"", 4},
		{"queue=billing", 2},
		{"queue=billing&queue=orders.x", 4},
		{"job_name=invoice", 2},
		{"job_name=invoice&queue=billing", 1},
		{"failure_class=permanent", 1},
		{"failure_class=exhausted&failure_class=permanent", 4},
		{"status=quarantined", 4},
		{"status=replayed", 0},
		{"owner=payments", 2},
		{"source=http", 4},
		{"source=rabbit", 0},
		{"idempotency_key=key-2", 1},
		{"failed_after=" + url.QueryEscape(baseTime.Add(time.Hour).Format(time.RFC3339)), 2},
		{"failed_before=" + url.QueryEscape(baseTime.Add(time.Hour).Format(time.RFC3339)), 2},
		{"q=declined", 1},
		{"q=DECLINED", 1},
	}
	for _, tc := range cases {
		t.Run(tc.query, func(t *testing.T) {
			t.Parallel()
			if n := e.count(e.viewer, "&"+tc.query); n != tc.want {
				t.Fatalf("%s: %d, want %d", tc.query, n, tc.want)
			}
		})
	}
}

func TestGetMessagePayloadForms(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	jsonPayload := []byte("{ \"b\" : [1, 2.50],\n\"a\": \"<é>\" }")
	body := array(
		[]byte(`{"envelope":"quarantine.failure/v1","job":{"name":"j","queue":"q","idempotency_key":"k","payload":`+string(jsonPayload)+`}}`),
		[]byte(`{"envelope":"quarantine.failure/v1","job":{"name":"j","queue":"q","idempotency_key":"k","payload_base64":"AP8BAg=="}}`),
		[]byte(`{"envelope":"quarantine.failure/v1","job":{"name":"j","queue":"q","idempotency_key":"k","payload":"hi","content_type":"text/plain"}}`),
		[]byte(`{"envelope":"quarantine.failure/v1","job":{"name":"j","queue":"q","idempotency_key":"k","payload_base64":"eyJhIjoxfQ==","content_type":"application/vnd.x+json"}}`),
	)
	res := e.ingestOK(e.operator, body)
	cases := []struct {
		asJSON bool
		bytes  []byte
	}{
		{true, jsonPayload},
		{false, []byte{0, 0xff, 1, 2}},
		{false, []byte(`"hi"`)},
		{true, []byte(`{"a":1}`)},
	}
	for i, tc := range cases {
		r := e.get("/api/v1/messages/"+res.Items[i].ID, e.viewer)
		var m message
		r.decode(t, &m)
		if (m.PayloadBase64 == nil) != tc.asJSON || !bytes.Equal(m.payloadBytes(t), tc.bytes) {
			t.Fatalf("item %d: payload %q base64 %v", i, m.Payload, m.PayloadBase64)
		}
		if sha(tc.bytes) != m.PayloadSHA256 || r.header.Get("ETag") != `"`+sha(tc.bytes)+`"` {
			t.Fatalf("item %d: hash %s etag %s", i, m.PayloadSHA256, r.header.Get("ETag"))
		}
		if tc.asJSON && !bytes.Contains(r.body, tc.bytes) {
			t.Fatalf("item %d: the JSON payload is not in the body byte-exact", i)
		}
	}
	if m := e.message(res.Items[0].ID, e.viewer); !quarantine.ValidID(m.ID) || m.Flags == nil || m.Headers == nil {
		t.Fatalf("message %+v", m.Message)
	}
}

func TestListOlderThan(t *testing.T) {
	t.Parallel()
	now := baseTime.Add(3 * time.Hour)
	e := newEnv(t, withNow(func() time.Time { return now }))
	var elems [][]byte
	for i := range 4 { // failed 3h, 2h, 1h and 0h ago
		elems = append(elems, envelopeJSON("billing", "job", i, baseTime.Add(time.Duration(i)*time.Hour)))
	}
	e.ingestOK(e.operator, array(elems...))
	for _, tc := range []struct {
		query string
		want  int
	}{
		{"older_than=90m", 2},
		{"older_than=1h", 2}, // failed_at < now-1h: the one failed exactly 1h ago is not older
		{"older_than=59m", 3},
		{"older_than=1d", 0},
		{"older_than=2h30m&queue=billing", 1},
		{"older_than=1s", 3}, // the one failed just now is not
	} {
		if n := e.count(e.viewer, "&"+tc.query); n != tc.want {
			t.Errorf("%s: %d, want %d", tc.query, n, tc.want)
		}
	}
}

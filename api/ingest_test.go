package api_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
)

type ingestResult struct {
	Received   int `json:"received"`
	Stored     int `json:"stored"`
	Duplicates int `json:"duplicates"`
	Items      []struct {
		Index        int      `json:"index"`
		ID           string   `json:"id"`
		New          bool     `json:"new"`
		FailureClass string   `json:"failure_class"`
		Flags        []string `json:"flags"`
		Problems     []struct {
			Field  string `json:"field"`
			Detail string `json:"detail"`
		} `json:"problems"`
	} `json:"items"`
}

type message struct {
	quarantine.Message
	Payload       json.RawMessage `json:"payload"`
	PayloadBase64 *string         `json:"payload_base64"`
}

// payloadBytes returns the payload a GET showed, whichever way it came.
func (m *message) payloadBytes(t *testing.T) []byte {
	t.Helper()
	if m.PayloadBase64 != nil {
		if m.Payload != nil {
			t.Fatal("both payload and payload_base64")
		}
		b, err := base64.StdEncoding.DecodeString(*m.PayloadBase64)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if m.Payload == nil {
		t.Fatal("no payload")
	}
	return m.Payload
}

func (e *env) ingestOK(secret string, body []byte) ingestResult {
	e.t.Helper()
	r := e.ingest(secret, body)
	if r.status != http.StatusOK {
		e.t.Fatalf("ingest: %d %s", r.status, clipBody(r.body))
	}
	var res ingestResult
	r.decode(e.t, &res)
	if res.Received != len(res.Items) || res.Stored+res.Duplicates != res.Received {
		e.t.Fatalf("inconsistent counts %+v", res)
	}
	return res
}

func (e *env) message(id, secret string) message {
	e.t.Helper()
	r := e.get("/api/v1/messages/"+id, secret)
	if r.status != http.StatusOK {
		e.t.Fatalf("get %s: %d %s", id, r.status, clipBody(r.body))
	}
	var m message
	r.decode(e.t, &m)
	if r.header.Get("ETag") != `"`+m.PayloadSHA256+`"` {
		e.t.Fatalf("ETag %q for sha %s", r.header.Get("ETag"), m.PayloadSHA256)
	}
	return m
}

// count lists every message the secret may see.
func (e *env) count(secret, query string) int {
	e.t.Helper()
	r := e.get("/api/v1/messages?limit=1000"+query, secret)
	if r.status != http.StatusOK {
		e.t.Fatalf("list: %d %s", r.status, clipBody(r.body))
	}
	var page struct {
		Items      []message `json:"items"`
		NextCursor *string   `json:"next_cursor"`
	}
	r.decode(e.t, &page)
	if page.NextCursor != nil {
		e.t.Fatal("more than 1000 messages")
	}
	return len(page.Items)
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestIngestOneEnvelope(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	res := e.ingestOK(e.operator, envelopeJSON("billing", "send_invoice", 1, baseTime))
	if res.Received != 1 || res.Stored != 1 || len(res.Items) != 1 || !res.Items[0].New || !quarantine.ValidID(res.Items[0].ID) {
		t.Fatalf("result %+v", res)
	}
	it := res.Items[0]
	if it.FailureClass != "exhausted" || len(it.Flags) != 0 || len(it.Problems) != 0 {
		t.Fatalf("item %+v", it)
	}
	m := e.message(it.ID, e.viewer)
	if string(m.payloadBytes(t)) != `{"n":1}` || m.Queue != "billing" || m.Owner != "payments" || m.JobName != "send_invoice" ||
		m.Source != "http" || m.SourceKind != quarantine.SourceHTTP || m.IdempotencyKey != "key-1" || m.Attempts != 3 ||
		!m.FailedAt.Equal(baseTime) || m.Status != quarantine.StatusQuarantined || m.MessageID != "job-billing-1" {
		t.Fatalf("stored %+v payload %s", m.Message, m.Payload)
	}
}

func TestIngestArray(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	body := array(envelopeJSON("billing", "a", 1, baseTime), envelopeJSON("orders.eu", "b", 2, baseTime),
		envelopeJSON("misc", "c", 3, baseTime))
	res := e.ingestOK(e.admin, body)
	if res.Received != 3 || res.Stored != 3 {
		t.Fatalf("result %+v", res)
	}
	for i, it := range res.Items {
		if it.Index != i || !it.New {
			t.Fatalf("item %d: %+v", i, it)
		}
	}
	if n := e.count(e.viewer, ""); n != 3 {
		t.Fatalf("listed %d", n)
	}
	if n := e.count(e.viewer, "&owner=orders"); n != 1 {
		t.Fatalf("owner orders: %d", n)
	}
	// Whitespace around the body does not make it another envelope.
	if r := e.ingestOK(e.admin, append([]byte(" \n"), append(envelopeJSON("misc", "c", 3, baseTime), '\n')...)); r.Duplicates != 1 {
		t.Fatalf("whitespace-wrapped duplicate: %+v", r)
	}
	if r := e.ingestOK(e.admin, []byte(`[]`)); r.Received != 0 || len(r.Items) != 0 {
		t.Fatalf("empty array: %+v", r)
	}
}

func TestIngestIsIdempotent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	env := envelopeJSON("billing", "a", 1, baseTime)
	first := e.ingestOK(e.operator, env)
	second := e.ingestOK(e.operator, env)
	if second.Stored != 0 || second.Duplicates != 1 || second.Items[0].New || second.Items[0].ID != first.Items[0].ID {
		t.Fatalf("second ingest %+v, first %+v", second, first)
	}
	// The replayed job failing again has a new failed_at: a new message.
	third := e.ingestOK(e.operator, envelopeJSON("billing", "a", 1, baseTime.Add(time.Minute)))
	if third.Stored != 1 {
		t.Fatalf("refailure %+v", third)
	}
	// Within one array, the repeat is a duplicate too.
	inArray := e.ingestOK(e.operator, array(envelopeJSON("billing", "z", 9, baseTime), envelopeJSON("billing", "z", 9, baseTime)))
	if inArray.Stored != 1 || inArray.Duplicates != 1 || inArray.Items[0].ID != inArray.Items[1].ID {
		t.Fatalf("in-array duplicate %+v", inArray)
	}
	if n := e.count(e.viewer, ""); n != 3 {
		t.Fatalf("listed %d, want 3", n)
	}
}

func TestIngestConcurrentOverlapping(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const workers, per = 8, 10
	var wg sync.WaitGroup
	results := make([]*resp, workers)
	errs := make([]error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var elems [][]byte
			for i := w * 3; i < w*3+per; i++ { // worker w sends envelopes 3w..3w+9: neighbours overlap
				elems = append(elems, envelopeJSON("orders.x", "job", i, baseTime.Add(time.Duration(i)*time.Second)))
			}
			results[w], errs[w] = e.send(http.MethodPost, "/api/v1/ingest", e.operator, array(elems...))
		}()
	}
	wg.Wait()
	unique := 3*(workers-1) + per
	total := 0
	for w, r := range results {
		if errs[w] != nil {
			t.Fatal(errs[w])
		}
		checkResponse(t, r.req, r)
		var res ingestResult
		r.decode(t, &res)
		if r.status != http.StatusOK || res.Received != per {
			t.Fatalf("worker %d: %d %s", w, r.status, clipBody(r.body))
		}
		total += res.Stored
	}
	if n := e.count(e.viewer, ""); n != unique || total != unique {
		t.Fatalf("listed %d, stored %d in all, want %d", n, total, unique)
	}
}

func TestIngestBadInputIsStoredRaw(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withMaxPayload(64))
	big := strings.Repeat("x", 100)
	cases := []struct {
		name  string
		body  []byte
		raw   bool // the whole body is the payload
		class string
		flags []string
		field string // a problem names it
	}{
		{"malformed JSON", []byte(`{"envelope":"quarantine.failure/v1", "job": {`), true, "malformed",
			[]string{quarantine.FlagMalformed}, ""},
		{"not JSON at all", []byte("\x00\x01binary garbage\xff"), true, "malformed",
			[]string{quarantine.FlagMalformed, quarantine.FlagInvalidUTF8}, ""},
		{"unknown version", []byte(`{"envelope":"quarantine.failure/v9","job":{"name":"a","queue":"billing","payload":1}}`), true, "malformed",
			[]string{quarantine.FlagMalformed, quarantine.FlagUnknownEnvelope}, "/envelope"},
		{"invalid UTF-8 in a string", []byte("{\"envelope\":\"quarantine.failure/v1\",\"job\":{\"name\":\"a\xff\",\"queue\":\"billing\",\"payload\":1}}"), true, "malformed",
			[]string{quarantine.FlagMalformed, quarantine.FlagInvalidUTF8}, ""},
		{"missing job name", []byte(`{"envelope":"quarantine.failure/v1","job":{"queue":"billing","idempotency_key":"k","payload":{"a":1}},"failure":{"class":"permanent"}}`), true, "malformed",
			[]string{quarantine.FlagMalformed, quarantine.FlagMissingJobName}, "/job/name"},
		{"oversized payload", []byte(`{"envelope":"quarantine.failure/v1","job":{"name":"a","queue":"billing","idempotency_key":"k","payload":"` + big + `"},"failure":{"class":"permanent"}}`), false, "permanent",
			[]string{quarantine.FlagPayloadTooLarge}, "/job/payload"},
		{"hostile strings", []byte(`{"envelope":"quarantine.failure/v1","job":{"name":"<script>alert(1)</script>","queue":"billing'; DROP TABLE messages;--","idempotency_key":"\u0000","payload":{"q":"' OR 1=1"}},"failure":{"class":"permanent","reason":"\u0000\u202e"}}`), false, "permanent",
			nil, "-"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res := e.ingestOK(e.operator, tc.body)
			it := res.Items[0]
			if res.Stored != 1 || it.FailureClass != tc.class {
				t.Fatalf("result %+v", res)
			}
			for _, f := range tc.flags {
				if !slices.Contains(it.Flags, f) {
					t.Fatalf("flag %s missing: %v", f, it.Flags)
				}
			}
			if tc.field != "-" && !slices.ContainsFunc(it.Problems, func(p struct {
				Field  string `json:"field"`
				Detail string `json:"detail"`
			}) bool {
				return p.Field == tc.field
			}) {
				t.Fatalf("no problem names %q: %+v", tc.field, it.Problems)
			}
			m := e.message(it.ID, e.viewer)
			got := m.payloadBytes(t)
			if tc.raw {
				if sha(got) != sha(tc.body) || m.PayloadSHA256 != sha(tc.body) || m.PayloadSize != len(tc.body) {
					t.Fatalf("payload %q is not the body byte-exact", got)
				}
				if m.Reason == "" {
					t.Fatal("malformed without a reason")
				}
			} else if sha(got) != m.PayloadSHA256 {
				t.Fatalf("payload %q does not hash to %s", got, m.PayloadSHA256)
			}
			for _, f := range tc.flags {
				if !m.HasFlag(f) {
					t.Fatalf("stored flags %v lack %s", m.Flags, f)
				}
			}
		})
	}
}

func TestIngestHardCaps(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withMaxBody(4096))
	big := array(envelopeJSON("billing", "a", 1, baseTime), []byte(`{"pad":"`+strings.Repeat("p", 5000)+`"}`))
	e.ingest(e.operator, big).problem(t, http.StatusRequestEntityTooLarge, "")
	e.ingest(e.operator, []byte{}).problem(t, http.StatusBadRequest, "")
	// Without a Content-Length (chunked), the cap applies while reading.
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/api/v1/ingest", io.MultiReader(bytes.NewReader(big)))
	req.Header.Set("Authorization", "Bearer "+e.operator)
	req.Header.Set("Content-Type", "application/json")
	res, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if req.ContentLength != 0 || res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("chunked: length %d, status %d %s", req.ContentLength, res.StatusCode, b)
	}
	checkResponse(t, req, &resp{status: res.StatusCode, header: res.Header, body: b})

	many := bytes.Repeat([]byte("0,"), 10001)
	many = append(append([]byte("["), many[:len(many)-1]...), ']')
	e2 := newEnv(t)
	e2.ingest(e2.operator, many).problem(t, http.StatusRequestEntityTooLarge, "")
	if n := e.count(e.viewer, "") + e2.count(e2.viewer, ""); n != 0 {
		t.Fatalf("%d messages stored from refused bodies", n)
	}
	// 10,000 elements are accepted.
	ok := bytes.Repeat([]byte(`{"n":1},`), 10000)
	ok = append(append([]byte("["), ok[:len(ok)-1]...), ']')
	if res := e2.ingestOK(e2.operator, ok); res.Received != 10000 || res.Stored != 1 || res.Duplicates != 9999 {
		t.Fatalf("10,000 copies: received %d stored %d duplicates %d", res.Received, res.Stored, res.Duplicates)
	}
}

func TestIngestMixedArray(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	res := e.ingestOK(e.operator, array(envelopeJSON("billing", "a", 1, baseTime), []byte(`5`), []byte(`"x"`), []byte(`null`)))
	if res.Received != 4 || res.Stored != 4 {
		t.Fatalf("result %+v", res)
	}
	for i, want := range []string{"exhausted", "malformed", "malformed", "malformed"} {
		if res.Items[i].FailureClass != want {
			t.Fatalf("item %d: %+v", i, res.Items[i])
		}
	}
	m := e.message(res.Items[1].ID, e.viewer)
	if string(m.payloadBytes(t)) != "5" {
		t.Fatalf("element payload %q", m.Payload)
	}
}

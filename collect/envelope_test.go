package collect_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
)

var origin = collect.Origin{Source: "http", Kind: quarantine.SourceHTTP, MaxPayloadBytes: 64}

// envelope returns a valid v1 envelope with the given job and failure
// fields replaced (a nil value deletes the field).
func envelope(t *testing.T, job, failure map[string]any) []byte {
	t.Helper()
	j := map[string]any{
		"id": "job-1", "name": "send_invoice", "queue": "billing", "idempotency_key": "inv-42",
		"schema_version": "3", "attempts": 5, "enqueued_at": "2026-11-29T10:00:00Z",
		"headers": map[string]string{"x-trace": "abc"}, "payload": json.RawMessage(`{"invoice": 42,  "lines":[1, 2]}`),
	}
	f := map[string]any{"class": "exhausted", "reason": "timeout after 30s", "failed_at": "2026-11-29T11:00:00.123456Z",
		"first_failed_at": "2026-11-29T10:30:00Z"}
	for k, v := range job {
		if v == nil {
			delete(j, k)
		} else {
			j[k] = v
		}
	}
	for k, v := range failure {
		if v == nil {
			delete(f, k)
		} else {
			f[k] = v
		}
	}
	b, err := json.Marshal(map[string]any{"envelope": collect.EnvelopeV1, "job": j, "failure": f})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeEnvelopeValid(t *testing.T) {
	t.Parallel()
	raw := envelope(t, nil, nil)
	m, problems := collect.DecodeEnvelope(raw, origin)
	if len(problems) != 0 {
		t.Fatalf("problems: %+v", problems)
	}
	failed := time.Date(2026, 11, 29, 11, 0, 0, 123456000, time.UTC)
	want := quarantine.Message{Source: "http", SourceKind: quarantine.SourceHTTP, Queue: "billing", JobName: "send_invoice",
		MessageID: "job-1", IdempotencyKey: "inv-42", SchemaVersion: "3", Attempts: 5, FailureClass: quarantine.ClassExhausted,
		Reason: "timeout after 30s", ContentType: "application/json", FailedAt: failed}
	if m.Source != want.Source || m.SourceKind != want.SourceKind || m.Queue != want.Queue || m.JobName != want.JobName ||
		m.MessageID != want.MessageID || m.IdempotencyKey != want.IdempotencyKey || m.SchemaVersion != want.SchemaVersion ||
		m.Attempts != want.Attempts || m.FailureClass != want.FailureClass || m.Reason != want.Reason ||
		m.ContentType != want.ContentType || !m.FailedAt.Equal(failed) {
		t.Fatalf("decoded %+v", m)
	}
	// json.Marshal compacts a RawMessage: compare with what the envelope holds.
	if got := string(m.Payload); got != `{"invoice":42,"lines":[1,2]}` {
		t.Fatalf("payload %q", got)
	}
	if m.EnqueuedAt == nil || !m.EnqueuedAt.Equal(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)) ||
		m.FirstFailedAt == nil || !m.FirstFailedAt.Equal(time.Date(2026, 11, 29, 10, 30, 0, 0, time.UTC)) {
		t.Fatalf("times %v %v", m.EnqueuedAt, m.FirstFailedAt)
	}
	if m.Headers["x-trace"] != "abc" || len(m.Flags) != 0 || m.DedupeKey != quarantine.PayloadHash(raw) {
		t.Fatalf("headers %v flags %v key %s", m.Headers, m.Flags, m.DedupeKey)
	}
}

func TestDecodeEnvelopeKeepsPayloadBytes(t *testing.T) {
	t.Parallel()
	payload := "{ \"b\" : [1,\n 2.50, 1e3],\t\"a\":\"<é\\u00e9>\" }"
	raw := []byte(`{"failure":{"class":"permanent"},"envelope":"quarantine.failure/v1","extra":{"future":true},` +
		`"job":{"name":"n","queue":"q","idempotency_key":"k","payload":` + payload + `,"new_field":[1]}}`)
	m, problems := collect.DecodeEnvelope(raw, origin)
	if len(problems) != 0 || m.FailureClass != quarantine.ClassPermanent {
		t.Fatalf("unknown fields must be tolerated: %+v %s", problems, m.FailureClass)
	}
	if string(m.Payload) != payload {
		t.Fatalf("payload %q, want %q", m.Payload, payload)
	}
}

func TestDecodeEnvelopeCases(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		raw       []byte
		malformed bool
		class     quarantine.FailureClass
		flags     []string // after Normalize
		field     string   // a problem must name it ("-" for none)
		reason    string   // substring of the reason, for malformed results
		payload   string   // expected payload of a valid result ("-" to skip)
		ctype     string
	}{
		{name: "base64 payload", raw: envelope(t, map[string]any{"payload": nil, "payload_base64": "AAEC/w=="}, nil),
			class: quarantine.ClassExhausted, field: "-", payload: "\x00\x01\x02\xff", ctype: "application/octet-stream"},
		{name: "base64 with its content type", raw: envelope(t, map[string]any{"payload": nil, "payload_base64": "aGk=", "content_type": "text/plain"}, nil),
			class: quarantine.ClassExhausted, field: "-", payload: "hi", ctype: "text/plain"},
		{name: "invalid base64", raw: envelope(t, map[string]any{"payload": nil, "payload_base64": "not base64!"}, nil),
			malformed: true, flags: []string{quarantine.FlagMalformed}, field: "/job/payload_base64", reason: "job.payload_base64 is not valid base64"},
		{name: "both payloads", raw: envelope(t, map[string]any{"payload_base64": "aGk="}, nil),
			malformed: true, flags: []string{quarantine.FlagMalformed}, field: "/job/payload_base64", reason: "both set"},
		{name: "no payload", raw: envelope(t, map[string]any{"payload": nil}, nil),
			malformed: true, flags: []string{quarantine.FlagMalformed}, field: "/job/payload", reason: "job.payload or job.payload_base64 is required"},
		{name: "null payload is a payload", raw: envelope(t, map[string]any{"payload": json.RawMessage("null")}, nil),
			class: quarantine.ClassExhausted, field: "-", payload: "null", ctype: "application/json"},
		{name: "unknown class", raw: envelope(t, nil, map[string]any{"class": "cosmic_ray"}),
			class: quarantine.ClassUnknown, field: "/failure/class", payload: "-", ctype: "application/json"},
		{name: "missing class", raw: envelope(t, nil, map[string]any{"class": nil}),
			class: quarantine.ClassUnknown, field: "/failure/class", payload: "-", ctype: "application/json"},
		{name: "missing failure", raw: []byte(`{"envelope":"quarantine.failure/v1","job":{"name":"n","queue":"q","idempotency_key":"k","payload":1}}`),
			class: quarantine.ClassUnknown, field: "/failure", payload: "1", ctype: "application/json"},
		{name: "bad failed_at", raw: envelope(t, nil, map[string]any{"failed_at": "yesterday"}),
			class: quarantine.ClassExhausted, field: "/failure/failed_at", payload: "-", ctype: "application/json"},
		{name: "bad enqueued_at", raw: envelope(t, map[string]any{"enqueued_at": "2026-13-01T00:00:00Z"}, nil),
			class: quarantine.ClassExhausted, field: "/job/enqueued_at", payload: "-", ctype: "application/json"},
		{name: "missing idempotency key", raw: envelope(t, map[string]any{"idempotency_key": nil}, nil),
			class: quarantine.ClassExhausted, flags: []string{quarantine.FlagMissingIdempotencyKey}, field: "-", payload: "-", ctype: "application/json"},
		{name: "missing queue", raw: envelope(t, map[string]any{"queue": nil}, nil),
			class: quarantine.ClassExhausted, field: "/job/queue", payload: "-", ctype: "application/json"},
		{name: "payload too large", raw: envelope(t, map[string]any{"payload": strings.Repeat("x", 100)}, nil),
			class: quarantine.ClassExhausted, flags: []string{quarantine.FlagPayloadTooLarge}, field: "/job/payload", payload: `"` + strings.Repeat("x", 100) + `"`, ctype: "application/json"},
		{name: "missing job name", raw: envelope(t, map[string]any{"name": nil}, nil),
			malformed: true, flags: []string{quarantine.FlagMalformed, quarantine.FlagMissingJobName}, field: "/job/name", reason: "job.name is missing"},
		{name: "empty job name", raw: envelope(t, map[string]any{"name": "  "}, nil),
			malformed: true, flags: []string{quarantine.FlagMalformed, quarantine.FlagMissingJobName}, field: "/job/name", reason: "job.name is empty"},
		{name: "missing job", raw: []byte(`{"envelope":"quarantine.failure/v1","failure":{"class":"permanent"}}`),
			malformed: true, flags: []string{quarantine.FlagMalformed, quarantine.FlagMissingJobName, quarantine.FlagMissingIdempotencyKey}, field: "/job", reason: "job is missing"},
		{name: "job not an object", raw: []byte(`{"envelope":"quarantine.failure/v1","job":[1]}`),
			malformed: true, flags: []string{quarantine.FlagMalformed}, field: "/job", reason: "job must be a JSON object, got array"},
		{name: "attempts a string", raw: envelope(t, map[string]any{"attempts": "5"}, nil),
			malformed: true, flags: []string{quarantine.FlagMalformed}, field: "/job/attempts", reason: "job.attempts must be an integer, got string"},
		{name: "attempts huge", raw: envelope(t, map[string]any{"attempts": json.RawMessage("1e30")}, nil),
			malformed: true, flags: []string{quarantine.FlagMalformed}, field: "/job/attempts", reason: "between 0 and"},
		{name: "name a number", raw: envelope(t, map[string]any{"name": 7}, nil),
			malformed: true, flags: []string{quarantine.FlagMalformed, quarantine.FlagMissingJobName}, field: "/job/name", reason: "job.name must be a string, got number"},
		{name: "header not a string", raw: envelope(t, map[string]any{"headers": map[string]any{"a/b": 1}}, nil),
			malformed: true, flags: []string{quarantine.FlagMalformed}, field: "/job/headers/a~1b", reason: "must be a string"},
		{name: "queue too long", raw: envelope(t, map[string]any{"queue": strings.Repeat("q", 2000)}, nil),
			malformed: true, flags: []string{quarantine.FlagMalformed}, field: "/job/queue", reason: "longer than 1024 bytes"},
		{name: "unknown envelope version", raw: []byte(`{"envelope":"quarantine.failure/v9","job":{}}`),
			malformed: true, flags: []string{quarantine.FlagMalformed, quarantine.FlagUnknownEnvelope}, field: "/envelope", reason: `unknown envelope version "quarantine.failure/v9"`},
		{name: "no envelope field", raw: []byte(`{"job":{"name":"x"}}`),
			malformed: true, flags: []string{quarantine.FlagMalformed}, field: "/envelope", reason: "envelope is missing"},
		{name: "invalid JSON", raw: []byte(`{"envelope": "quarantine.failure/v1", oops}`),
			malformed: true, flags: []string{quarantine.FlagMalformed}, field: "", reason: "invalid JSON at offset 38: invalid character 'o'"},
		{name: "trailing garbage", raw: []byte(`{} {}`),
			malformed: true, flags: []string{quarantine.FlagMalformed}, field: "", reason: "invalid JSON at offset"},
		{name: "not an object", raw: []byte(`"just a string"`),
			malformed: true, flags: []string{quarantine.FlagMalformed}, field: "", reason: "envelope must be a JSON object, got string"},
		{name: "null", raw: []byte(`null`),
			malformed: true, flags: []string{quarantine.FlagMalformed}, field: "", reason: "got null"},
		{name: "empty", raw: []byte{},
			malformed: true, flags: []string{quarantine.FlagMalformed}, field: "", reason: "the envelope is empty"},
		{name: "invalid UTF-8", raw: []byte("{\"envelope\":\"quarantine.failure/v1\",\"job\":{\"name\":\"\xff\xfe\"}}"),
			malformed: true, flags: []string{quarantine.FlagMalformed, quarantine.FlagInvalidUTF8}, field: "", reason: "not valid UTF-8 at offset 51"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, problems := collect.DecodeEnvelope(tc.raw, origin)
			m.Normalize(time.Now())
			checkInvariants(t, tc.raw, m, problems)
			if tc.malformed {
				if m.FailureClass != quarantine.ClassMalformed || !strings.Contains(m.Reason, tc.reason) {
					t.Fatalf("class %s reason %q, want malformed with %q", m.FailureClass, m.Reason, tc.reason)
				}
			} else {
				if m.FailureClass != tc.class || m.HasFlag(quarantine.FlagMalformed) {
					t.Fatalf("class %s flags %v, want %s", m.FailureClass, m.Flags, tc.class)
				}
				if tc.payload != "-" && string(m.Payload) != tc.payload {
					t.Fatalf("payload %q, want %q", m.Payload, tc.payload)
				}
				if m.ContentType != tc.ctype {
					t.Fatalf("content type %q, want %q", m.ContentType, tc.ctype)
				}
			}
			for _, f := range tc.flags {
				if !m.HasFlag(f) {
					t.Errorf("flag %s missing from %v", f, m.Flags)
				}
			}
			if tc.field == "-" {
				if len(problems) != 0 {
					t.Fatalf("unexpected problems %+v", problems)
				}
				return
			}
			found := false
			for _, p := range problems {
				found = found || p.Field == tc.field
			}
			if !found {
				t.Fatalf("no problem names %q: %+v", tc.field, problems)
			}
		})
	}
}

func TestDecodeEnvelopeMissingFailedAtIsCollectionTime(t *testing.T) {
	t.Parallel()
	m, problems := collect.DecodeEnvelope(envelope(t, nil, map[string]any{"failed_at": nil}), origin)
	if len(problems) != 0 || !m.FailedAt.IsZero() {
		t.Fatalf("failed_at %v problems %+v", m.FailedAt, problems)
	}
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	m.Normalize(now)
	if !m.FailedAt.Equal(now) {
		t.Fatalf("failed_at %v after Normalize, want %v", m.FailedAt, now)
	}
}

func TestDecodeEnvelopeMalformedKeepsDecodedFields(t *testing.T) {
	t.Parallel()
	raw := envelope(t, map[string]any{"name": nil}, nil)
	m, _ := collect.DecodeEnvelope(raw, origin)
	if m.Queue != "billing" || m.IdempotencyKey != "inv-42" || m.MessageID != "job-1" || !bytes.Equal(m.Payload, raw) {
		t.Fatalf("decoded fields lost: %+v", m)
	}
	if !strings.Contains(m.Reason, "failure.reason was: timeout after 30s") || m.ContentType != "application/json" {
		t.Fatalf("reason %q content type %q", m.Reason, m.ContentType)
	}
}

func TestDecodeEnvelopeDedupeKey(t *testing.T) {
	t.Parallel()
	a := envelope(t, nil, nil)
	b := envelope(t, nil, map[string]any{"failed_at": "2026-11-29T12:00:00Z"}) // the replayed job failing again
	ma, _ := collect.DecodeEnvelope(a, origin)
	ma2, _ := collect.DecodeEnvelope(bytes.Clone(a), origin)
	mb, _ := collect.DecodeEnvelope(b, origin)
	if ma.DedupeKey != ma2.DedupeKey || ma.DedupeKey == mb.DedupeKey || ma.DedupeKey != quarantine.PayloadHash(a) {
		t.Fatalf("dedupe keys %s %s %s", ma.DedupeKey, ma2.DedupeKey, mb.DedupeKey)
	}
}

// checkInvariants asserts what holds for every input.
func checkInvariants(t *testing.T, raw []byte, m *quarantine.Message, problems []collect.Problem) {
	t.Helper()
	if m == nil {
		t.Fatal("nil message")
	}
	if m.DedupeKey != quarantine.PayloadHash(raw) {
		t.Fatalf("dedupe key %s is not the hash of the input", m.DedupeKey)
	}
	if (m.FailureClass == quarantine.ClassMalformed) != m.HasFlag(quarantine.FlagMalformed) {
		t.Fatalf("class %s but flags %v", m.FailureClass, m.Flags)
	}
	if m.FailureClass == quarantine.ClassMalformed {
		if !bytes.Equal(m.Payload, raw) {
			t.Fatalf("malformed payload is not the input bytes")
		}
		if m.Reason == "" || len(problems) == 0 {
			t.Fatalf("malformed without a reason or problem: %q %+v", m.Reason, problems)
		}
	} else if !json.Valid(raw) || !utf8.Valid(raw) {
		t.Fatalf("invalid input decoded as a valid envelope")
	}
	if !m.FailureClass.Valid() || m.Flags == nil || m.PayloadSHA256 != quarantine.PayloadHash(m.Payload) {
		t.Fatalf("not normalised: class %q flags %v", m.FailureClass, m.Flags)
	}
	for _, s := range []string{m.Source, m.Queue, m.JobName, m.MessageID, m.IdempotencyKey, m.SchemaVersion, m.ContentType, m.Reason} {
		if !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
			t.Fatalf("text field %q is not clean after Normalize", s)
		}
	}
	for _, p := range problems {
		if p.Detail == "" || (p.Field != "" && !strings.HasPrefix(p.Field, "/")) {
			t.Fatalf("bad problem %+v", p)
		}
	}
}

func FuzzDecodeEnvelope(f *testing.F) {
	f.Add([]byte(`{"envelope":"quarantine.failure/v1","job":{"name":"a","queue":"q","payload":{"x":1}},"failure":{"class":"permanent"}}`))
	f.Add([]byte(`{"envelope":"quarantine.failure/v1","job":{"name":"a","payload_base64":"AA=="},"failure":{"failed_at":"2026-01-01T00:00:00Z"}}`))
	f.Add([]byte(`[1,2,3]`))
	f.Add([]byte("\xff"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		in := bytes.Clone(raw)
		m, problems := collect.DecodeEnvelope(raw, collect.Origin{Source: "fuzz", Kind: quarantine.SourceMemory, MaxPayloadBytes: 32})
		if !bytes.Equal(raw, in) {
			t.Fatal("DecodeEnvelope changed its input")
		}
		payload := bytes.Clone(m.Payload)
		m.Normalize(time.Now())
		if !bytes.Equal(payload, m.Payload) {
			t.Fatal("Normalize changed the payload")
		}
		checkInvariants(t, raw, m, problems)
		if len(m.Payload) > 32 && !m.HasFlag(quarantine.FlagPayloadTooLarge) {
			t.Fatal("large payload not flagged")
		}
	})
}

// Text is stored as sent, or flagged precisely (issue 14): an escaped NUL
// is replaced (PostgreSQL text cannot hold it) and flagged nul_replaced,
// a lone surrogate is flagged lone_surrogate instead of silently becoming
// U+FFFD, and a queue no broker could route is dropped and flagged
// invalid_queue instead of being rewritten into another queue's name.
func TestDecodeEnvelopeText(t *testing.T) {
	t.Parallel()
	env := func(job, failure string) []byte {
		return []byte(`{"envelope":"quarantine.failure/v1","job":{"name":"n","queue":"q","idempotency_key":"k","payload":1` + job +
			`},"failure":{"class":"permanent"` + failure + `}}`)
	}
	cases := []struct {
		name    string
		raw     []byte
		check   func(m *quarantine.Message) bool
		flags   []string // exactly these, after Normalize
		problem string   // a problem names this field ("" for none)
	}{
		{"NUL in queue", env(`,"queue":"a\u0000b"`, ""), func(m *quarantine.Message) bool { return m.Queue == "" },
			[]string{quarantine.FlagInvalidQueue}, "/job/queue"},
		{"control character in queue", env(`,"queue":"a\u001bb"`, ""), func(m *quarantine.Message) bool { return m.Queue == "" },
			[]string{quarantine.FlagInvalidQueue}, "/job/queue"},
		{"queue over 255 bytes", env(`,"queue":"`+strings.Repeat("q", 256)+`"`, ""), func(m *quarantine.Message) bool { return m.Queue == "" },
			[]string{quarantine.FlagInvalidQueue}, "/job/queue"},
		{"lone surrogate in queue", env(`,"queue":"a\ud800"`, ""), func(m *quarantine.Message) bool { return m.Queue == "" },
			[]string{quarantine.FlagLoneSurrogate, quarantine.FlagInvalidQueue}, "/job/queue"},
		{"NUL in id", env(`,"id":"j\u0000"`, ""), func(m *quarantine.Message) bool { return m.MessageID == "j\u2400" },
			[]string{quarantine.FlagNULReplaced}, ""},
		{"NUL in reason", env("", `,"reason":"x\u0000y"`), func(m *quarantine.Message) bool { return m.Reason == "x\u2400y" },
			[]string{quarantine.FlagNULReplaced}, ""},
		{"lone surrogate in job name", env(`,"name":"x\ud800"`, ""), func(m *quarantine.Message) bool { return m.JobName == "x\uFFFD" },
			[]string{quarantine.FlagLoneSurrogate}, "/job/name"},
		{"lone low surrogate in reason", env("", `,"reason":"\udc00 then \ud800\u0041"`),
			func(m *quarantine.Message) bool { return m.Reason == "\uFFFD then \uFFFDA" },
			[]string{quarantine.FlagLoneSurrogate}, "/failure/reason"},
		{"surrogate pair", env(`,"name":"\ud83d\ude00"`, `,"reason":"\ud83d\ude00"`),
			func(m *quarantine.Message) bool { return m.JobName == "😀" && m.Reason == "😀" }, nil, ""},
		{"unicode queue", env(`,"queue":"commandes.\u00e9t\u00e9"`, ""), func(m *quarantine.Message) bool { return m.Queue == "commandes.été" },
			nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, problems := collect.DecodeEnvelope(tc.raw, origin)
			m.Normalize(time.Now())
			checkInvariants(t, tc.raw, m, problems)
			if m.FailureClass != quarantine.ClassPermanent || !tc.check(m) {
				t.Fatalf("decoded %+v", m)
			}
			if strings.Join(m.Flags, ",") != strings.Join(tc.flags, ",") {
				t.Errorf("flags %v, want %v", m.Flags, tc.flags)
			}
			found := tc.problem == ""
			for _, p := range problems {
				found = found || p.Field == tc.problem
			}
			if !found || (tc.problem == "" && len(problems) > 0) {
				t.Errorf("problems %+v, want one naming %q", problems, tc.problem)
			}
		})
	}
}

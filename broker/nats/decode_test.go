package nats

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
)

var stored = time.Date(2026, 11, 29, 12, 0, 0, 123456789, time.UTC)

// envelopeBody returns a valid v1 envelope for job number i.
func envelopeBody(i int, queue string) []byte {
	b, _ := json.Marshal(map[string]any{
		"envelope": collect.EnvelopeV1,
		"job": map[string]any{
			"id": fmt.Sprintf("job-%d", i), "name": "send_invoice", "queue": queue,
			"idempotency_key": fmt.Sprintf("inv-%d", i), "attempts": 5,
			"headers": map[string]string{"x-trace": "abc"},
			"payload": map[string]any{"invoice": i},
		},
		"failure": map[string]any{"class": "exhausted", "reason": "timeout after 30s", "failed_at": "2026-11-29T11:00:00Z"},
	})
	return b
}

func TestDecodeFailure(t *testing.T) {
	t.Parallel()
	failedAt := time.Date(2026, 11, 29, 11, 0, 0, 0, time.UTC)
	cases := []struct {
		name      string
		data      []byte
		header    nats.Header
		queue     string
		class     quarantine.FailureClass
		attempts  int
		messageID string
		payload   []byte // nil: not checked
		flags     []string
		headers   map[string]string
		ctype     string
		failedAt  time.Time
		reason    string // substring
	}{
		{name: "envelope", data: envelopeBody(7, "billing"), header: nats.Header{"Nats-Msg-Id": {"x"}},
			queue: "billing", class: quarantine.ClassExhausted, attempts: 5, messageID: "job-7",
			payload: []byte(`{"invoice":7}`), headers: map[string]string{"x-trace": "abc"}, ctype: "application/json",
			failedAt: failedAt, reason: "timeout after 30s"},
		{name: "envelope without queue falls back to the subject",
			data:  []byte(`{"envelope":"quarantine.failure/v1","job":{"name":"a","payload":{}},"failure":{"class":"permanent"}}`),
			queue: "failures.orders", class: quarantine.ClassPermanent, messageID: "F:42", failedAt: stored,
			ctype: "application/json"},
		{name: "plain JSON is raw and flagged", data: []byte(`{"order":1}`),
			header: nats.Header{"Nats-Msg-Id": {"m-1"}, "X-Multi": {"a", "b"}},
			queue:  "failures.orders", class: quarantine.ClassMalformed, messageID: "m-1", payload: []byte(`{"order":1}`),
			flags: []string{quarantine.FlagMalformed}, headers: map[string]string{"Nats-Msg-Id": "m-1", "X-Multi": `["a","b"]`},
			ctype: "application/json", failedAt: stored, reason: "envelope is missing"},
		{name: "empty body", data: []byte{}, queue: "failures.orders", class: quarantine.ClassMalformed,
			messageID: "F:42", payload: []byte{}, flags: []string{quarantine.FlagMalformed}, ctype: "application/octet-stream",
			failedAt: stored, reason: "empty"},
		{name: "binary with content type header", data: []byte{0xff, 0x00, 0xfe},
			header: nats.Header{"content-type": {"image/png"}}, queue: "failures.orders", class: quarantine.ClassMalformed,
			messageID: "F:42", payload: []byte{0xff, 0x00, 0xfe},
			flags:   []string{quarantine.FlagInvalidUTF8, quarantine.FlagMalformed},
			headers: map[string]string{"content-type": "image/png"}, ctype: "image/png", failedAt: stored, reason: "UTF-8"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := streamMsg{Stream: "F", Seq: 42, Time: stored, Subject: "failures.orders", Header: tc.header, Data: tc.data}
			m := decodeFailure("coll", in)
			if m.Source != "coll" || m.SourceKind != quarantine.SourceNATS {
				t.Errorf("source = %q/%q", m.Source, m.SourceKind)
			}
			if want := DedupeKey("F", 42, stored); m.DedupeKey != want {
				t.Errorf("dedupe key = %q, want %q", m.DedupeKey, want)
			}
			if m.Queue != tc.queue || m.FailureClass != tc.class || m.Attempts != tc.attempts || m.MessageID != tc.messageID {
				t.Errorf("queue/class/attempts/id = %q/%q/%d/%q, want %q/%q/%d/%q",
					m.Queue, m.FailureClass, m.Attempts, m.MessageID, tc.queue, tc.class, tc.attempts, tc.messageID)
			}
			if tc.payload != nil && !bytes.Equal(m.Payload, tc.payload) {
				t.Errorf("payload = %q, want %q", m.Payload, tc.payload)
			}
			for _, f := range tc.flags {
				if !m.HasFlag(f) {
					t.Errorf("flags %v lack %s", m.Flags, f)
				}
			}
			if len(tc.flags) == 0 && len(m.Flags) != 0 {
				t.Errorf("unexpected flags %v", m.Flags)
			}
			if tc.headers != nil && fmt.Sprint(m.Headers) != fmt.Sprint(tc.headers) {
				t.Errorf("headers = %v, want %v", m.Headers, tc.headers)
			}
			if m.ContentType != tc.ctype {
				t.Errorf("content type = %q, want %q", m.ContentType, tc.ctype)
			}
			if !m.FailedAt.Equal(tc.failedAt) {
				t.Errorf("failed at = %v, want %v", m.FailedAt, tc.failedAt)
			}
			if !strings.Contains(m.Reason, tc.reason) {
				t.Errorf("reason %q lacks %q", m.Reason, tc.reason)
			}
		})
	}
}

func TestDecodeOriginal(t *testing.T) {
	t.Parallel()
	failed := stored.Add(time.Minute)
	in := streamMsg{Stream: "ORDERS", Seq: 9, Time: stored, Subject: "orders.charge",
		Header: nats.Header{"Nats-Msg-Id": {"o-9"}, "X-Idempotency-Key": {"k-9"}}, Data: envelopeBody(9, "elsewhere")}
	m := decodeOriginal("coll", in, gaveUp{Consumer: "w", Deliveries: 4, FailedAt: failed, Reason: maxDeliverReason("ORDERS", "w", 4)})
	// The original is the job itself: kept byte-exact even when it looks
	// like an envelope, so that a replay publishes exactly what failed.
	if !bytes.Equal(m.Payload, in.Data) {
		t.Fatalf("payload changed")
	}
	if m.Queue != "orders.charge" || m.FailureClass != quarantine.ClassDeliveryLimit || m.Attempts != 4 ||
		m.MessageID != "o-9" || !m.FailedAt.Equal(failed) || m.EnqueuedAt == nil || !m.EnqueuedAt.Equal(stored) {
		t.Fatalf("got %+v", m)
	}
	if m.Headers["X-Idempotency-Key"] != "k-9" || m.ContentType != "application/json" || len(m.Flags) != 0 {
		t.Fatalf("headers %v content type %q flags %v", m.Headers, m.ContentType, m.Flags)
	}
	if !strings.Contains(m.Reason, `"w"`) || !strings.Contains(m.Reason, "4 deliveries") {
		t.Fatalf("reason %q", m.Reason)
	}
	if m.DedupeKey != DedupeKey("ORDERS", 9, stored) {
		t.Fatalf("dedupe key %q", m.DedupeKey)
	}
	bin := decodeOriginal("coll", streamMsg{Stream: "S", Seq: 1, Subject: "s", Data: nil}, gaveUp{})
	if bin.Payload == nil || len(bin.Payload) != 0 || bin.ContentType != collect.ContentTypeBinary || bin.MessageID != "S:1" {
		t.Fatalf("empty original: %+v", bin)
	}
}

func TestParseAdvisory(t *testing.T) {
	t.Parallel()
	valid := `{"type":"io.nats.jetstream.advisory.v1.max_deliver","id":"x","timestamp":"2026-11-29T20:03:40.8Z","stream":"S","consumer":"C","stream_seq":2,"deliveries":3}`
	cases := []struct {
		name, data, err string
	}{
		{"valid", valid, ""},
		{"empty", "", "empty"},
		{"not JSON", "{", "not valid JSON"},
		{"invalid UTF-8", "\xff", "UTF-8"},
		{"other type", strings.Replace(valid, "max_deliver", "terminated", 1), "type is"},
		{"other stream", strings.Replace(valid, `"stream":"S"`, `"stream":"T"`, 1), "stream is"},
		{"other consumer", strings.Replace(valid, `"consumer":"C"`, `"consumer":"D"`, 1), "consumer is"},
		{"no sequence", strings.Replace(valid, `"stream_seq":2,`, ``, 1), "stream_seq"},
		{"negative sequence", strings.Replace(valid, `"stream_seq":2`, `"stream_seq":-2`, 1), "not valid JSON"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, err := parseAdvisory([]byte(tc.data), "S", "C")
			if tc.err == "" {
				if err != nil || a.StreamSeq != 2 || a.deliveries() != 3 || a.Timestamp.IsZero() {
					t.Fatalf("parse = %+v, %v", a, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.err)
			}
		})
	}
}

func TestDecodeBadAdvisory(t *testing.T) {
	t.Parallel()
	in := streamMsg{Stream: "CAP", Seq: 3, Time: stored, Subject: AdvisorySubject("S", "C"), Data: []byte("\xff\xfe")}
	_, perr := parseAdvisory(in.Data, "S", "C")
	m := decodeBadAdvisory("coll", in, perr)
	if m.FailureClass != quarantine.ClassMalformed || !m.HasFlag(quarantine.FlagMalformed) || !m.HasFlag(quarantine.FlagInvalidUTF8) {
		t.Fatalf("class %q flags %v", m.FailureClass, m.Flags)
	}
	if !bytes.Equal(m.Payload, in.Data) || m.DedupeKey != DedupeKey("CAP", 3, stored) || !strings.Contains(m.Reason, "UTF-8") {
		t.Fatalf("got %+v", m)
	}
}

func TestDedupeKey(t *testing.T) {
	t.Parallel()
	a, b := DedupeKey("S", 1, stored), DedupeKey("S", 1, stored.Add(time.Nanosecond))
	if a == b {
		t.Fatal("a re-created stream's message got the key of the old one")
	}
	if DedupeKey("S", 1, stored) != a || DedupeKey("S", 1, time.Time{}) != "S:1" {
		t.Fatal("the key is not stable")
	}
}

// FuzzDecodeFailure: any message of a failure stream decodes to a message
// the store accepts, with the body kept byte-exact when it is not an
// envelope, and the input never changed.
func FuzzDecodeFailure(f *testing.F) {
	f.Add(envelopeBody(1, "q"), "failures.q", "X-Key", "v")
	f.Add([]byte(`{"order":1}`), "a.b", "Nats-Msg-Id", "m")
	f.Add([]byte{}, "x", "", "")
	f.Add([]byte("\xff\x00"), "x", "Content-Type", "text/plain\r\nEvil: 1")
	f.Fuzz(func(t *testing.T, data []byte, subject, hk, hv string) {
		in := bytes.Clone(data)
		h := nats.Header{}
		if hk != "" {
			h[hk] = []string{hv}
		}
		m := decodeFailure("fuzz", streamMsg{Stream: "F", Seq: 1, Time: stored, Subject: subject, Header: h, Data: data})
		if !bytes.Equal(data, in) {
			t.Fatal("the input changed")
		}
		if m.HasFlag(quarantine.FlagMalformed) && !bytes.Equal(m.Payload, data) {
			t.Fatal("a raw body was not kept byte-exact")
		}
		if m.Queue == "" && subject != "" {
			t.Fatal("no queue")
		}
		checkStorable(t, m)
	})
}

// FuzzParseAdvisory: any capture-stream message becomes either a valid
// advisory or a malformed message holding its exact bytes.
func FuzzParseAdvisory(f *testing.F) {
	f.Add([]byte(`{"type":"io.nats.jetstream.advisory.v1.max_deliver","stream":"S","consumer":"C","stream_seq":5,"deliveries":3,"timestamp":"2026-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"type":"io.nats.jetstream.advisory.v1.max_deliver","stream":"S","consumer":"C","stream_seq":18446744073709551615,"deliveries":18446744073709551615}`))
	f.Add([]byte(`null`))
	f.Add([]byte("\xff"))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := parseAdvisory(data, "S", "C")
		if err == nil {
			if a.StreamSeq == 0 || a.deliveries() < 0 {
				t.Fatalf("accepted %+v", a)
			}
			return
		}
		m := decodeBadAdvisory("fuzz", streamMsg{Stream: "CAP", Seq: 1, Data: data}, err)
		if !bytes.Equal(m.Payload, data) || !utf8.ValidString(m.Reason) && !strings.Contains(m.Reason, "advisory") {
			t.Fatal("bad advisory not kept")
		}
		checkStorable(t, m)
	})
}

// checkStorable normalises m as the store does and checks what every store
// requires of it.
func checkStorable(t *testing.T, m *quarantine.Message) {
	t.Helper()
	payload := bytes.Clone(m.Payload)
	m.Normalize(time.Now())
	if !bytes.Equal(payload, m.Payload) {
		t.Fatal("Normalize changed the payload")
	}
	if !m.FailureClass.Valid() || m.Payload == nil && m.PayloadSize != 0 {
		t.Fatalf("class %q", m.FailureClass)
	}
	for _, s := range []string{m.Queue, m.MessageID, m.Reason, m.DedupeKey, m.ContentType} {
		if !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
			t.Fatalf("text field %q not storable", s)
		}
	}
	for k, v := range m.Headers {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			t.Fatalf("header %q not storable", k)
		}
	}
}

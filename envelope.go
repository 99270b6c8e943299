package quarantine

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// EnvelopeV1 is the value of the "envelope" field of the canonical failure
// envelope, JSON:
//
//	{"envelope":"quarantine.failure/v1",
//	 "job":{"id","name","queue","idempotency_key","schema_version","attempts",
//	        "enqueued_at","content_type","headers","payload" | "payload_base64"},
//	 "failure":{"class","reason","failed_at","first_failed_at"}}
//
// Package collect decodes it (collect.DecodeEnvelope); MarshalEnvelope
// writes it.
const EnvelopeV1 = "quarantine.failure/v1"

// MarshalEnvelope encodes m as a canonical failure envelope (EnvelopeV1)
// carrying payload and headers instead of m's own payload and headers, so
// that a replay sends the latest payload version and the replay headers.
//
// The output is deterministic: fields in the order of the EnvelopeV1
// comment, header names sorted, times in RFC 3339 (UTC, nanoseconds when
// present), no HTML escaping. The payload is written as JSON under
// "payload", byte for byte, when it is valid UTF-8 JSON without
// surrounding white space and m's content type is empty or a JSON type;
// otherwise it is base64 (standard, padded) under "payload_base64". Empty
// text fields, a zero failed_at and nil times are left out; attempts is
// always written. Decoding the result with collect.DecodeEnvelope gives
// back m's job and failure fields, payload and headers exactly.
//
// It returns an EINVALID *Error when m is nil.
func MarshalEnvelope(m *Message, payload []byte, headers map[string]string) ([]byte, error) {
	if m == nil {
		return nil, Errorf(EINVALID, "envelope: no message to encode")
	}
	var w envWriter
	w.buf.Grow(len(payload)*4/3 + 512)
	w.buf.WriteString(`{"envelope":`)
	w.str(EnvelopeV1)
	w.buf.WriteString(`,"job":{`)
	w.first = true
	w.field("id", m.MessageID)
	w.field("name", m.JobName)
	w.field("queue", m.Queue)
	w.field("idempotency_key", m.IdempotencyKey)
	w.field("schema_version", m.SchemaVersion)
	w.key("attempts")
	w.buf.WriteString(strconv.Itoa(max(m.Attempts, 0)))
	w.timeField("enqueued_at", m.EnqueuedAt)
	w.field("content_type", m.ContentType)
	if headers != nil {
		w.key("headers")
		w.headers(headers)
	}
	if payloadIsJSON(m.ContentType, payload) {
		w.key("payload")
		w.buf.Write(payload)
	} else {
		w.key("payload_base64")
		w.str(base64.StdEncoding.EncodeToString(payload))
	}
	w.buf.WriteString(`},"failure":{`)
	w.first = true
	w.field("class", string(m.FailureClass))
	w.field("reason", m.Reason)
	if !m.FailedAt.IsZero() {
		w.timeField("failed_at", &m.FailedAt)
	}
	w.timeField("first_failed_at", m.FirstFailedAt)
	w.buf.WriteString("}}")
	return w.buf.Bytes(), nil
}

// payloadIsJSON reports whether p can be embedded as JSON and read back
// byte for byte: valid UTF-8 JSON with no white space around it, under an
// empty or JSON content type.
func payloadIsJSON(contentType string, p []byte) bool {
	if len(p) == 0 || !utf8.Valid(p) || !json.Valid(p) {
		return false
	}
	if len(bytes.TrimSpace(p)) != len(p) {
		return false
	}
	ct := strings.ToLower(strings.TrimSpace(contentType))
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = strings.TrimSpace(ct[:i])
	}
	return ct == "" || ct == "application/json" || strings.HasSuffix(ct, "+json")
}

// envWriter builds an envelope in order.
type envWriter struct {
	buf   bytes.Buffer
	first bool // no field written yet in the current object
}

func (w *envWriter) key(k string) {
	if !w.first {
		w.buf.WriteByte(',')
	}
	w.first = false
	w.str(k)
	w.buf.WriteByte(':')
}

// field writes k: v unless v is empty.
func (w *envWriter) field(k, v string) {
	if v == "" {
		return
	}
	w.key(k)
	w.str(v)
}

func (w *envWriter) timeField(k string, t *time.Time) {
	if t == nil {
		return
	}
	w.key(k)
	w.str(t.UTC().Format(time.RFC3339Nano))
}

func (w *envWriter) headers(h map[string]string) {
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	sort.Strings(names)
	w.buf.WriteByte('{')
	for i, k := range names {
		if i > 0 {
			w.buf.WriteByte(',')
		}
		w.str(k)
		w.buf.WriteByte(':')
		w.str(h[k])
	}
	w.buf.WriteByte('}')
}

// str writes s as a JSON string without HTML escaping; invalid UTF-8
// becomes U+FFFD, as encoding/json does.
func (w *envWriter) str(s string) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	w.buf.Write(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}

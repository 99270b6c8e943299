package collect

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/quarantine-dev/quarantine"
)

// refDecodeEnvelope is DecodeEnvelope as it was before the one-pass
// decoder (encoding/json, re-scanning the envelope at every level): the
// reference the differential fuzz test compares the decoder with.
func refDecodeEnvelope(raw []byte, o Origin) (*quarantine.Message, []Problem) {
	d := &refDecoder{raw: raw, m: &quarantine.Message{
		Source:     o.Source,
		SourceKind: o.Kind,
		DedupeKey:  quarantine.PayloadHash(raw),
	}}
	d.decode()
	d.finish(o.MaxPayloadBytes)
	return d.m, d.problems
}

// refDecoder holds the state of one DecodeEnvelope call.
type refDecoder struct {
	raw       []byte
	m         *quarantine.Message
	problems  []Problem
	malformed []string // details of the problems that make the envelope malformed
	reason    string   // failure.reason as the envelope gave it
}

// bad records a problem that makes the envelope malformed.
func (d *refDecoder) bad(field, format string, args ...any) {
	detail := fmt.Sprintf(format, args...)
	d.problems = append(d.problems, Problem{Field: field, Detail: detail})
	d.malformed = append(d.malformed, detail)
}

// warn records a problem that leaves the envelope valid.
func (d *refDecoder) warn(field, format string, args ...any) {
	d.problems = append(d.problems, Problem{Field: field, Detail: fmt.Sprintf(format, args...)})
}

func (d *refDecoder) decode() {
	if len(d.raw) == 0 {
		d.bad("", "the envelope is empty")
		return
	}
	if i := InvalidUTF8At(d.raw); i >= 0 {
		d.m.AddFlag(quarantine.FlagInvalidUTF8)
		d.bad("", "not valid UTF-8 at offset %d", i)
		return
	}
	top, ok := d.object(d.raw, "", "envelope")
	if !ok {
		return
	}
	v, ok := top["envelope"]
	switch {
	case !ok || isNull(v):
		d.bad("/envelope", "envelope is missing: not a %s envelope", EnvelopeV1)
		return
	case kindOf(v) != "string":
		d.m.AddFlag(quarantine.FlagUnknownEnvelope)
		d.bad("/envelope", "envelope must be a string, got %s", kindOf(v))
		return
	}
	var version string
	_ = json.Unmarshal(v, &version)
	if version != EnvelopeV1 {
		d.m.AddFlag(quarantine.FlagUnknownEnvelope)
		d.bad("/envelope", "unknown envelope version %q", quarantine.Clip(version))
		return
	}
	d.job(top["job"])
	d.failure(top["failure"])
}

// object decodes raw as a JSON object; a missing or null value is reported
// as missing.
func (d *refDecoder) object(raw json.RawMessage, ptr, name string) (map[string]json.RawMessage, bool) {
	if raw == nil || (ptr != "" && isNull(raw)) {
		d.bad(ptr, "%s is missing", name)
		return nil, false
	}
	var obj map[string]json.RawMessage
	err := json.Unmarshal(raw, &obj)
	var syn *json.SyntaxError
	switch {
	case errors.As(err, &syn):
		d.bad(ptr, "invalid JSON at offset %d: %s", syntaxOffset(syn), syn.Error())
		return nil, false
	case err != nil || obj == nil:
		d.bad(ptr, "%s must be a JSON object, got %s", name, kindOf(raw))
		return nil, false
	}
	return obj, true
}

func (d *refDecoder) job(raw json.RawMessage) {
	job, ok := d.object(raw, "/job", "job")
	if !ok {
		d.m.AddFlag(quarantine.FlagMissingJobName)
		return
	}
	m := d.m
	m.MessageID, _ = d.text(job, "/job/id", "id")
	var present bool
	if m.JobName, present = d.text(job, "/job/name", "name"); !present || strings.TrimSpace(m.JobName) == "" {
		m.AddFlag(quarantine.FlagMissingJobName)
		if present {
			d.bad("/job/name", "job.name is empty")
		} else {
			d.bad("/job/name", "job.name is missing")
		}
	}
	if m.Queue, present = d.text(job, "/job/queue", "queue"); !present {
		d.warn("/job/queue", "job.queue is missing: the message has no replay destination")
	}
	m.IdempotencyKey, _ = d.text(job, "/job/idempotency_key", "idempotency_key")
	m.SchemaVersion = d.schemaVersion(job["schema_version"])
	m.Attempts = d.attempts(job["attempts"])
	m.EnqueuedAt = d.time(job, "/job/enqueued_at", "enqueued_at")
	m.Headers = d.headers(job["headers"])
	m.ContentType, _ = d.text(job, "/job/content_type", "content_type")
	d.payload(job)
}

// payload sets the payload from job.payload (its exact bytes) or
// job.payload_base64 (decoded), and the default content type.
func (d *refDecoder) payload(job map[string]json.RawMessage) {
	p, hasP := job["payload"]
	b, hasB := job["payload_base64"]
	if hasB && isNull(b) {
		hasB = false
	}
	if hasP && hasB && isNull(p) {
		hasP = false
	}
	switch {
	case hasP && hasB:
		d.bad("/job/payload_base64", "job.payload and job.payload_base64 are both set")
	case hasP:
		d.m.Payload = []byte(p)
		if d.m.ContentType == "" {
			d.m.ContentType = ContentTypeJSON
		}
	case hasB:
		if kindOf(b) != "string" {
			d.bad("/job/payload_base64", "job.payload_base64 must be a string, got %s", kindOf(b))
			return
		}
		var s string
		_ = json.Unmarshal(b, &s)
		dec, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			d.bad("/job/payload_base64", "job.payload_base64 is not valid base64: %v", err)
			return
		}
		d.m.Payload = dec
		if d.m.ContentType == "" {
			d.m.ContentType = ContentTypeBinary
		}
	default:
		d.bad("/job/payload", "job.payload or job.payload_base64 is required")
	}
}

func (d *refDecoder) failure(raw json.RawMessage) {
	if raw == nil || isNull(raw) {
		d.warn("/failure", "failure is missing: the failure class is unknown")
		d.m.FailureClass = quarantine.ClassUnknown
		return
	}
	f, ok := d.object(raw, "/failure", "failure")
	if !ok {
		return
	}
	class, present := d.text(f, "/failure/class", "class")
	switch c := quarantine.FailureClass(class); {
	case !present:
		d.warn("/failure/class", "failure.class is missing: stored as unknown")
		d.m.FailureClass = quarantine.ClassUnknown
	case !c.Valid():
		d.warn("/failure/class", "unknown failure class %q: stored as unknown", quarantine.Clip(class))
		d.m.FailureClass = quarantine.ClassUnknown
	default:
		d.m.FailureClass = c
	}
	d.reason, _ = d.string(f, "/failure/reason", "reason")
	d.m.Reason = d.reason
	if t := d.time(f, "/failure/failed_at", "failed_at"); t != nil {
		d.m.FailedAt = *t
	}
	d.m.FirstFailedAt = d.time(f, "/failure/first_failed_at", "first_failed_at")
}

// string returns the string at key; null counts as absent. A value of
// another type is a malformed-making problem.
func (d *refDecoder) string(obj map[string]json.RawMessage, ptr, key string) (string, bool) {
	v, ok := obj[key]
	if !ok || isNull(v) {
		return "", false
	}
	if kindOf(v) != "string" {
		d.bad(ptr, "%s must be a string, got %s", dotted(ptr), kindOf(v))
		return "", false
	}
	var s string
	_ = json.Unmarshal(v, &s)
	return s, true
}

// text is string for a field capped at MaxFieldBytes.
func (d *refDecoder) text(obj map[string]json.RawMessage, ptr, key string) (string, bool) {
	s, ok := d.string(obj, ptr, key)
	if len(s) > MaxFieldBytes {
		d.bad(ptr, "%s is longer than %d bytes", dotted(ptr), MaxFieldBytes)
		return "", ok
	}
	return s, ok
}

// schemaVersion accepts a string or a number (kept as written).
func (d *refDecoder) schemaVersion(v json.RawMessage) string {
	switch {
	case v == nil || isNull(v):
		return ""
	case kindOf(v) == "number":
		if len(v) > MaxFieldBytes {
			d.bad("/job/schema_version", "job.schema_version is longer than %d bytes", MaxFieldBytes)
			return ""
		}
		return string(v)
	}
	s, _ := d.text(map[string]json.RawMessage{"v": v}, "/job/schema_version", "v")
	return s
}

func (d *refDecoder) attempts(v json.RawMessage) int {
	if v == nil || isNull(v) {
		return 0
	}
	if kindOf(v) != "number" {
		d.bad("/job/attempts", "job.attempts must be an integer, got %s", kindOf(v))
		return 0
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil || n < 0 || n > math.MaxInt32 {
		d.bad("/job/attempts", "job.attempts must be an integer between 0 and %d, got %s", math.MaxInt32, quarantine.Clip(string(v)))
		return 0
	}
	return int(n)
}

// time parses an RFC 3339 time; a bad one is a soft problem and is dropped.
func (d *refDecoder) time(obj map[string]json.RawMessage, ptr, key string) *time.Time {
	s, ok := d.string(obj, ptr, key)
	if !ok {
		return nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		d.warn(ptr, "%s is not an RFC 3339 time: %q", dotted(ptr), quarantine.Clip(s))
		return nil
	}
	t = t.UTC()
	return &t
}

func (d *refDecoder) headers(v json.RawMessage) map[string]string {
	if v == nil || isNull(v) {
		return nil
	}
	obj, ok := d.object(v, "/job/headers", "job.headers")
	if !ok {
		return nil
	}
	h := make(map[string]string, len(obj))
	for k := range obj {
		ptr := "/job/headers/" + escapePointer(quarantine.Clip(k))
		s, ok := d.string(obj, ptr, k)
		if !ok {
			if isNull(obj[k]) {
				d.bad(ptr, "job.headers values must be strings, got null")
			}
			continue
		}
		h[k] = s
	}
	return h
}

// finish applies the outcome: a malformed envelope keeps its raw bytes as
// the payload; any payload above the soft limit is flagged.
func (d *refDecoder) finish(maxPayload int) {
	m := d.m
	if len(d.malformed) > 0 {
		m.Payload = bytes.Clone(d.raw)
		if m.Payload == nil {
			m.Payload = []byte{}
		}
		m.FailureClass = quarantine.ClassMalformed
		m.AddFlag(quarantine.FlagMalformed)
		m.ContentType = ContentTypeBinary
		if utf8.Valid(d.raw) && json.Valid(d.raw) {
			m.ContentType = ContentTypeJSON
		}
		m.Reason = strings.Join(d.malformed, "; ")
		if d.reason != "" {
			m.Reason += "; failure.reason was: " + d.reason
		}
	}
	if maxPayload > 0 && len(m.Payload) > maxPayload {
		m.AddFlag(quarantine.FlagPayloadTooLarge)
		d.warn("/job/payload", "payload is %d bytes, above the soft limit of %d: stored and flagged", len(m.Payload), maxPayload)
	}
	if m.Flags == nil {
		m.Flags = []string{}
	}
}

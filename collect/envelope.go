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

	"github.com/quarantine-dev/quarantine"
)

// EnvelopeV1 is the value of the "envelope" field of the canonical failure
// envelope this package reads.
const EnvelopeV1 = "quarantine.failure/v1"

// MaxFieldBytes caps each text field of an envelope's job (id, name, queue,
// idempotency key, schema version, content type). A longer value is a
// problem that makes the envelope malformed; the field is then left empty.
const MaxFieldBytes = quarantine.MaxFilterValue

// Content types given to payloads that do not say theirs.
const (
	ContentTypeJSON   = "application/json"
	ContentTypeBinary = "application/octet-stream"
)

// Origin says where raw bytes came from.
type Origin struct {
	Source          string                // the collector's name; "http" for the ingest endpoint
	Kind            quarantine.SourceKind // the kind of collector
	MaxPayloadBytes int                   // soft limit: a larger payload is stored and flagged; 0 means none
}

// Problem is one thing wrong with an envelope. Field is a JSON Pointer into
// the envelope ("" for the whole document, "/job/name" for a field).
type Problem struct {
	Field  string `json:"field"`
	Detail string `json:"detail"`
}

// DecodeEnvelope turns raw bytes into a message. It never fails.
//
// A valid envelope gives a message whose payload is the exact bytes of
// job.payload (or the decoded job.payload_base64). Bytes that are not a
// valid v1 envelope are kept byte-exact as the payload, with failure class
// malformed, the matching quarantine.Flag* flags and a Reason that says
// precisely what was wrong; the envelope's fields that could be decoded are
// kept. Softer problems (an unknown failure class, an unparsable time, a
// payload above o.MaxPayloadBytes) leave the message valid and are only
// reported. Every problem is listed in the returned slice.
//
// Unknown fields at any level are tolerated, for forward compatibility; an
// unknown "envelope" value is not. The message's DedupeKey is the SHA-256 of
// raw, so the same envelope sent twice is one message, and its MessageID is
// job.id. The message is not normalised: the store does that.
func DecodeEnvelope(raw []byte, o Origin) (*quarantine.Message, []Problem) {
	d := &decoder{raw: raw, m: &quarantine.Message{
		Source:     o.Source,
		SourceKind: o.Kind,
		DedupeKey:  quarantine.PayloadHash(raw),
	}}
	d.decode()
	d.finish(o.MaxPayloadBytes)
	return d.m, d.problems
}

// decoder holds the state of one DecodeEnvelope call.
type decoder struct {
	raw       []byte
	m         *quarantine.Message
	problems  []Problem
	malformed []string // details of the problems that make the envelope malformed
	reason    string   // failure.reason as the envelope gave it
	surrogate bool     // the last string decoded held a lone surrogate
}

// bad records a problem that makes the envelope malformed.
func (d *decoder) bad(field, format string, args ...any) {
	detail := fmt.Sprintf(format, args...)
	d.problems = append(d.problems, Problem{Field: field, Detail: detail})
	d.malformed = append(d.malformed, detail)
}

// warn records a problem that leaves the envelope valid.
func (d *decoder) warn(field, format string, args ...any) {
	d.problems = append(d.problems, Problem{Field: field, Detail: fmt.Sprintf(format, args...)})
}

func (d *decoder) decode() {
	if len(d.raw) == 0 {
		d.bad("", "the envelope is empty")
		return
	}
	if i := InvalidUTF8At(d.raw); i >= 0 {
		d.m.AddFlag(quarantine.FlagInvalidUTF8)
		d.bad("", "not valid UTF-8 at offset %d", i)
		return
	}
	var doc document
	if err := doc.parse(d.raw); err != nil {
		d.syntax(err)
		return
	}
	if doc.kind != '{' {
		d.bad("", "envelope must be a JSON object, got %s", kindOf(d.raw))
		return
	}
	v := doc.envelope
	switch {
	case v == nil || isNull(v):
		d.bad("/envelope", "envelope is missing: not a %s envelope", EnvelopeV1)
		return
	case kindOf(v) != "string":
		d.m.AddFlag(quarantine.FlagUnknownEnvelope)
		d.bad("/envelope", "envelope must be a string, got %s", kindOf(v))
		return
	}
	if version, _ := unquote(v); version != EnvelopeV1 {
		d.m.AddFlag(quarantine.FlagUnknownEnvelope)
		d.bad("/envelope", "unknown envelope version %q", quarantine.Clip(version))
		return
	}
	d.job(&doc.job)
	d.failure(&doc.failure)
}

// syntax reports the syntax error that made parse fail. The message is
// encoding/json's (the offset of the byte at fault and what was wrong),
// which this rare path asks it for.
func (d *decoder) syntax(err error) {
	var v any
	var syn *json.SyntaxError
	if errors.As(json.Unmarshal(d.raw, &v), &syn) {
		d.bad("", "invalid JSON at offset %d: %s", syntaxOffset(syn), syn.Error())
		return
	}
	d.bad("", "invalid JSON: %s", quarantine.Clip(err.Error()))
}

// job decodes the job object: its fields in a fixed order, so that the
// problems (and a malformed reason) read the same whatever the order of
// the members.
func (d *decoder) job(o *object) {
	if !d.isObject(o, "/job", "job") {
		d.m.AddFlag(quarantine.FlagMissingJobName)
		return
	}
	m := d.m
	m.MessageID, _ = d.text(o.get(jobID), "/job/id")
	var present bool
	if m.JobName, present = d.text(o.get(jobName), "/job/name"); !present || strings.TrimSpace(m.JobName) == "" {
		m.AddFlag(quarantine.FlagMissingJobName)
		if present {
			d.bad("/job/name", "job.name is empty")
		} else {
			d.bad("/job/name", "job.name is missing")
		}
	}
	d.queue(o.get(jobQueue))
	m.IdempotencyKey, _ = d.text(o.get(jobIdempotencyKey), "/job/idempotency_key")
	m.SchemaVersion = d.schemaVersion(o.get(jobSchemaVersion))
	m.Attempts = d.attempts(o.get(jobAttempts))
	m.EnqueuedAt = d.time(o.get(jobEnqueuedAt), "/job/enqueued_at")
	m.Headers = d.headers(&o.headers)
	m.ContentType, _ = d.text(o.get(jobContentType), "/job/content_type")
	d.payload(o)
}

// queue sets the queue, the job's replay destination. A name that no
// broker could route (see quarantine.QueueNameProblem) is not rewritten
// into one that some broker could: the message is stored without a
// queue and flagged, so that a replay needs an explicit destination.
func (d *decoder) queue(v []byte) {
	q, present := d.text(v, "/job/queue")
	switch {
	case !present:
		d.warn("/job/queue", "job.queue is missing: the message has no replay destination")
		return
	case d.surrogate:
		d.surrogate = false
		d.m.AddFlag(quarantine.FlagInvalidQueue)
		d.warn("/job/queue", "job.queue %s holds a lone UTF-16 surrogate, which no queue name can: the message has no replay destination", v)
		return
	}
	if p := quarantine.QueueNameProblem(q); p != "" {
		d.m.AddFlag(quarantine.FlagInvalidQueue)
		d.warn("/job/queue", "job.queue %q %s, so no broker could route it: the message has no replay destination", quarantine.Clip(q), p)
		return
	}
	d.m.Queue = q
}

// payload sets the payload from job.payload (its exact bytes) or
// job.payload_base64 (decoded), and the default content type.
func (d *decoder) payload(o *object) {
	p, b := o.get(jobPayload), o.get(jobPayloadBase64)
	hasP, hasB := p != nil, b != nil
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
		d.m.Payload = bytes.Clone(p)
		if d.m.ContentType == "" {
			d.m.ContentType = ContentTypeJSON
		}
	case hasB:
		if kindOf(b) != "string" {
			d.bad("/job/payload_base64", "job.payload_base64 must be a string, got %s", kindOf(b))
			return
		}
		s, _ := unquote(b)
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

func (d *decoder) failure(o *object) {
	if !o.present || isNull(o.raw) {
		d.warn("/failure", "failure is missing: the failure class is unknown")
		d.m.FailureClass = quarantine.ClassUnknown
		return
	}
	if !d.isObject(o, "/failure", "failure") {
		return
	}
	class, present := d.text(o.get(failureClass), "/failure/class")
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
	d.reason, _ = d.string(o.get(failureReason), "/failure/reason")
	d.m.Reason = d.reason
	if t := d.time(o.get(failureFailedAt), "/failure/failed_at"); t != nil {
		d.m.FailedAt = *t
	}
	d.m.FirstFailedAt = d.time(o.get(failureFirstFailedAt), "/failure/first_failed_at")
}

// isObject reports whether o is a JSON object, reporting a missing one
// (absent or null) or one of another type as a malformed-making problem.
func (d *decoder) isObject(o *object, ptr, name string) bool {
	switch {
	case !o.present || isNull(o.raw):
		d.bad(ptr, "%s is missing", name)
		return false
	case !o.isObject:
		d.bad(ptr, "%s must be a JSON object, got %s", name, kindOf(o.raw))
		return false
	}
	return true
}

// string returns the string value v (nil when absent); null counts as
// absent. A value of another type is a malformed-making problem. A lone
// UTF-16 surrogate escape, which no UTF-8 text can hold, becomes U+FFFD
// and flags the message lone_surrogate (d.surrogate says so to the
// caller).
func (d *decoder) string(v []byte, ptr string) (string, bool) {
	d.surrogate = false
	if v == nil || isNull(v) {
		return "", false
	}
	if kindOf(v) != "string" {
		d.bad(ptr, "%s must be a string, got %s", dotted(ptr), kindOf(v))
		return "", false
	}
	s, lone := unquote(v)
	if lone {
		d.surrogate = true
		d.m.AddFlag(quarantine.FlagLoneSurrogate)
		d.warn(ptr, "%s holds a lone UTF-16 surrogate escape, stored as U+FFFD", dotted(ptr))
	}
	return s, true
}

// text is string for a field capped at MaxFieldBytes.
func (d *decoder) text(v []byte, ptr string) (string, bool) {
	s, ok := d.string(v, ptr)
	if len(s) > MaxFieldBytes {
		d.bad(ptr, "%s is longer than %d bytes", dotted(ptr), MaxFieldBytes)
		return "", ok
	}
	return s, ok
}

// schemaVersion accepts a string or a number (kept as written).
func (d *decoder) schemaVersion(v []byte) string {
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
	s, _ := d.text(v, "/job/schema_version")
	return s
}

func (d *decoder) attempts(v []byte) int {
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
func (d *decoder) time(v []byte, ptr string) *time.Time {
	s, ok := d.string(v, ptr)
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

func (d *decoder) headers(o *headersObject) map[string]string {
	if !o.present || isNull(o.raw) {
		return nil
	}
	if !o.isObject {
		d.bad("/job/headers", "job.headers must be a JSON object, got %s", kindOf(o.raw))
		return nil
	}
	h := make(map[string]string, len(o.members))
	for _, mb := range o.members {
		ptr := "/job/headers/" + escapePointer(quarantine.Clip(mb.name))
		if isNull(mb.value) {
			d.bad(ptr, "job.headers values must be strings, got null")
			continue
		}
		if s, ok := d.string(mb.value, ptr); ok {
			h[mb.name] = s
		}
	}
	return h
}

// finish applies the outcome: a malformed envelope keeps its raw bytes as
// the payload; any payload above the soft limit is flagged.
func (d *decoder) finish(maxPayload int) {
	m := d.m
	if len(d.malformed) > 0 {
		m.Payload = bytes.Clone(d.raw)
		if m.Payload == nil {
			m.Payload = []byte{}
		}
		m.FailureClass = quarantine.ClassMalformed
		m.AddFlag(quarantine.FlagMalformed)
		m.ContentType = SniffContentType(d.raw)
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

// syntaxOffset returns the offset of the byte a syntax error is about
// (encoding/json reports the count of bytes read, one past it), or the
// input's length for an unexpected end.
func syntaxOffset(e *json.SyntaxError) int64 {
	if e.Offset > 0 && !strings.HasPrefix(e.Error(), "unexpected end") {
		return e.Offset - 1
	}
	return e.Offset
}

// kindOf names the JSON type of a valid JSON value.
func kindOf(v []byte) string {
	v = bytes.TrimLeft(v, " \t\r\n")
	if len(v) == 0 {
		return "nothing"
	}
	switch v[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

func isNull(v []byte) bool { return string(bytes.TrimSpace(v)) == "null" }

// dotted turns /job/name into job.name for messages.
func dotted(ptr string) string { return strings.ReplaceAll(strings.TrimPrefix(ptr, "/"), "/", ".") }

// escapePointer escapes a JSON Pointer reference token (RFC 6901).
func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

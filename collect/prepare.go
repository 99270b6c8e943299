package collect

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"strings"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/jsonptr"
)

// RedactedValue replaces the value of a redacted header.
const RedactedValue = "<redacted>"

// DefaultRedactHeaders are redacted when the configuration names none.
var DefaultRedactHeaders = []string{"authorization", "cookie"}

// IdempotencyRule says where the idempotency key of the jobs of some queues
// lives: in a header, or at a JSON Pointer (RFC 6901) into the payload,
// with an optional prefix.
type IdempotencyRule struct {
	Queues      []string `yaml:"queues" json:"queues"`
	Header      string   `yaml:"header,omitempty" json:"header,omitempty"`
	JSONPointer string   `yaml:"json_pointer,omitempty" json:"json_pointer,omitempty"`
	Prefix      string   `yaml:"prefix,omitempty" json:"prefix,omitempty"`
}

// Validate checks r. Fields of errors are relative to the rule.
func (r *IdempotencyRule) Validate() error {
	if len(r.Queues) == 0 {
		return quarantine.FieldErrorf(quarantine.EINVALID, "queues", "a rule needs at least one queue pattern")
	}
	for i, q := range r.Queues {
		if _, err := path.Match(q, ""); err != nil {
			return quarantine.FieldErrorf(quarantine.EINVALID, fmt.Sprintf("queues[%d]", i), "bad glob pattern %q: %v", q, err)
		}
	}
	switch {
	case (r.Header == "") == (r.JSONPointer == ""):
		return quarantine.FieldErrorf(quarantine.EINVALID, "header", "set exactly one of header and json_pointer")
	case r.JSONPointer != "":
		if !jsonptr.Valid(r.JSONPointer) {
			return quarantine.FieldErrorf(quarantine.EINVALID, "json_pointer", "%q is not a JSON Pointer (RFC 6901), e.g. /order_id", r.JSONPointer)
		}
	}
	return nil
}

// Describe names the rule as Message.KeyRule records it: "header:NAME"
// or "pointer:PTR", with " prefix:P" when it has a prefix.
func (r *IdempotencyRule) Describe() string {
	d := "pointer:" + r.JSONPointer
	if r.Header != "" {
		d = "header:" + strings.ToLower(r.Header)
	}
	if r.Prefix != "" {
		d += " prefix:" + r.Prefix
	}
	return d
}

// DefaultKeyHeaders are the headers (message attributes on SQS) a
// collector takes the idempotency key from when no rule matches the
// queue, compared case-insensitively, first found wins.
var DefaultKeyHeaders = []string{"x-idempotency-key", "idempotency-key", "idempotency_key"}

// KeyRule describes the rule that applies to queue now (the first that
// matches), or quarantine.KeyRuleDefault (the DefaultKeyHeaders). It is a
// quarantine.KeyRuleFunc: a replay compares it with the rule recorded on
// each message.
func (p *Preparer) KeyRule(queue string) string {
	if p != nil {
		for i := range p.Idempotency {
			if p.Idempotency[i].matches(queue) {
				return p.Idempotency[i].Describe()
			}
		}
	}
	return quarantine.KeyRuleDefault
}

func (r *IdempotencyRule) matches(queue string) bool {
	for _, p := range r.Queues {
		if ok, _ := path.Match(p, queue); ok {
			return true
		}
	}
	return false
}

// Preparer applies the configured rules to every collected message before
// it is stored: the idempotency key (when the message does not carry one),
// header redaction and the owner. The HTTP ingest and every collector use
// the same Preparer, so a message is treated alike whatever its route.
type Preparer struct {
	Owners      []quarantine.OwnerRule
	Idempotency []IdempotencyRule
	// RedactHeaders names headers (case-insensitive) whose values are
	// replaced by RedactedValue; nil means DefaultRedactHeaders.
	RedactHeaders []string
	// MaxPayloadBytes is the soft payload limit: a larger payload is stored
	// whole and flagged payload_too_large. 0 means no limit.
	MaxPayloadBytes int
}

// Prepare applies the rules to m in place. A nil Preparer only takes a
// missing key from the DefaultKeyHeaders.
func (p *Preparer) Prepare(m *quarantine.Message) {
	if p == nil {
		if m.IdempotencyKey == "" {
			m.IdempotencyKey, m.KeyRule = defaultHeaderKey(m.Headers), quarantine.KeyRuleDefault
		} else if m.KeyRule == "" {
			m.KeyRule = quarantine.KeyRuleEnvelope
		}
		return
	}
	switch {
	case m.IdempotencyKey != "":
		if m.KeyRule == "" {
			m.KeyRule = quarantine.KeyRuleEnvelope
		}
	default:
		m.IdempotencyKey = p.idempotencyKey(m)
		m.KeyRule = p.KeyRule(m.Queue)
	}
	redact := p.RedactHeaders
	if redact == nil {
		redact = DefaultRedactHeaders
	}
	for name := range m.Headers {
		for _, r := range redact {
			if strings.EqualFold(name, r) {
				m.Headers[name] = RedactedValue
			}
		}
	}
	if m.Owner == "" {
		m.Owner = quarantine.AssignOwner(p.Owners, m.Queue)
	}
	if p.MaxPayloadBytes > 0 && len(m.Payload) > p.MaxPayloadBytes {
		m.AddFlag(quarantine.FlagPayloadTooLarge)
	}
}

// idempotencyKey finds the key by the first rule matching m's queue; with
// no rule for the queue, in the first of DefaultKeyHeaders m carries; or "".
func (p *Preparer) idempotencyKey(m *quarantine.Message) string {
	return p.Key(m.Queue, m.Headers, m.Payload)
}

// Key derives the idempotency key of a job of queue from its headers and
// payload as the rules say now: the first rule matching queue, else the
// DefaultKeyHeaders. "" when none gives a key. A re-key applies it to
// stored messages.
func (p *Preparer) Key(queue string, headers map[string]string, payload []byte) string {
	if p == nil {
		return defaultHeaderKey(headers)
	}
	for i := range p.Idempotency {
		r := &p.Idempotency[i]
		if !r.matches(queue) {
			continue
		}
		var v string
		if r.Header != "" {
			v = HeaderValue(headers, r.Header)
		} else {
			v = pointerValue(payload, r.JSONPointer)
		}
		if v == "" {
			return ""
		}
		return r.Prefix + v
	}
	return defaultHeaderKey(headers)
}

// defaultHeaderKey is the value of the first of DefaultKeyHeaders in h, or "".
func defaultHeaderKey(h map[string]string) string {
	for _, name := range DefaultKeyHeaders {
		if v := HeaderValue(h, name); v != "" {
			return v
		}
	}
	return ""
}

// pointerValue resolves ptr in a JSON payload. Strings give their value;
// numbers and booleans their JSON text; objects, arrays, null, a missing
// member and a payload that is not JSON give "".
func pointerValue(payload []byte, ptr string) string {
	if !jsonptr.Valid(ptr) {
		return ""
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return ""
	}
	v, ok := jsonptr.Get(doc, ptr)
	if !ok {
		return ""
	}
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		return x.String()
	case bool:
		return fmt.Sprint(x)
	}
	return ""
}

// PayloadKey returns the idempotency key that the rules derive from
// payload for a job of queue, and whether a JSON Pointer rule applies to
// that queue at all. An edit must not change it: the API compares the
// key derived from the new payload with the stored one.
func (p *Preparer) PayloadKey(queue string, payload []byte) (key string, fromPayload bool) {
	if p == nil {
		return "", false
	}
	for i := range p.Idempotency {
		r := &p.Idempotency[i]
		if !r.matches(queue) {
			continue
		}
		if r.JSONPointer == "" {
			return "", false
		}
		v := pointerValue(payload, r.JSONPointer)
		if v == "" {
			return "", true
		}
		return r.Prefix + v, true
	}
	return "", false
}

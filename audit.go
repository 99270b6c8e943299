package quarantine

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"
)

// Audit actions. Later features add their own; the chain treats them all alike.
const (
	ActionTokenCreate  = "token.create"
	ActionTokenRevoke  = "token.revoke"
	ActionAccessDenied = "access.denied"
	ActionEdit         = "message.edit"
	ActionDiscard      = "message.discard"
	// ActionDiscardRefused records a discard its message's state refused
	// (it was being replayed).
	ActionDiscardRefused = "message.discard_refused"
	ActionPurge          = "retention.purge"
	// ActionLogin records a person's sign-in through single sign-on
	// (actor oidc:EMAIL; details: method, role, owners, groups, client).
	ActionLogin = "auth.login"
)

// GenesisHash is hash(0): the previous hash of the first event.
var GenesisHash = string(bytes.Repeat([]byte("0"), 64))

// AuditEvent is one entry of the append-only audit log. Hash is
// SHA-256(PrevHash || CanonicalJSON of the event), hex encoded, so each entry
// seals every entry before it.
type AuditEvent struct {
	Seq      int64           `json:"seq"`
	Time     time.Time       `json:"time"`
	Actor    string          `json:"actor"`
	Action   string          `json:"action"`
	Subject  string          `json:"subject"`
	Details  json.RawMessage `json:"details"`
	PrevHash string          `json:"prev_hash"`
	Hash     string          `json:"hash"`
}

// NewAuditEvent builds an event with details marshalled from v (nil gives
// an empty object). Seq, time and hashes are set by the store when it
// appends the event. Details that cannot be encoded are not dropped
// silently: the event records {"details_error": why, "details_type": the
// Go type} instead, and the chain shows it.
func NewAuditEvent(actor, action, subject string, details any) AuditEvent {
	raw := json.RawMessage(`{}`)
	if details != nil {
		b, err := json.Marshal(details)
		if err != nil {
			b, _ = json.Marshal(map[string]string{"details_error": err.Error(), "details_type": fmt.Sprintf("%T", details)})
		}
		raw = b
	}
	return AuditEvent{Actor: actor, Action: action, Subject: subject, Details: raw}
}

// Seal sets seq, time, prev hash and hash of e as the event following prev.
// Stores call it inside the transaction that appends e.
func (e *AuditEvent) Seal(prev AuditHead, now time.Time) error {
	e.Seq = prev.Seq + 1
	e.Time = now.UTC().Truncate(time.Microsecond)
	e.Actor = SanitizeText(e.Actor)
	e.Action = SanitizeText(e.Action)
	e.Subject = SanitizeText(e.Subject)
	e.PrevHash = prev.Hash
	if len(e.Details) == 0 {
		e.Details = json.RawMessage(`{}`)
	}
	d, err := canonicalJSON(e.Details)
	if err != nil {
		return Internal(err, "audit details are not valid JSON")
	}
	e.Details = d
	e.Hash = e.hash(d)
	return nil
}

// ComputeHash returns SHA-256(PrevHash || CanonicalJSON(e)) in hex.
func (e *AuditEvent) ComputeHash() (string, error) {
	details := e.Details
	if len(details) == 0 {
		details = json.RawMessage(`{}`)
	}
	d, err := canonicalJSON(details)
	if err != nil {
		return "", fmt.Errorf("audit details: %w", err)
	}
	return e.hash(d), nil
}

// hash is ComputeHash with details already canonical.
func (e *AuditEvent) hash(details []byte) string {
	h := sha256.New()
	h.Write([]byte(e.PrevHash))
	h.Write(e.canonical(details))
	return hex.EncodeToString(h.Sum(nil))
}

// CanonicalJSON is the byte form that is hashed: the object {action, actor,
// details, seq, subject, time} with keys sorted, no insignificant space,
// the time in RFC 3339 UTC with microseconds, and details canonical too.
func (e *AuditEvent) CanonicalJSON() ([]byte, error) {
	details := e.Details
	if len(details) == 0 {
		details = json.RawMessage(`{}`)
	}
	d, err := canonicalJSON(details)
	if err != nil {
		return nil, fmt.Errorf("audit details: %w", err)
	}
	return e.canonical(d), nil
}

// canonical is CanonicalJSON with details already canonical: the object
// written as writeCanonical writes it, its keys in their sorted order.
func (e *AuditEvent) canonical(details []byte) []byte {
	var buf bytes.Buffer
	buf.Grow(len(details) + len(e.Actor) + len(e.Action) + len(e.Subject) + 128)
	buf.WriteString(`{"action":`)
	writeString(&buf, e.Action)
	buf.WriteString(`,"actor":`)
	writeString(&buf, e.Actor)
	buf.WriteString(`,"details":`)
	buf.Write(details)
	buf.WriteString(`,"seq":`)
	buf.WriteString(strconv.FormatInt(e.Seq, 10))
	buf.WriteString(`,"subject":`)
	writeString(&buf, e.Subject)
	buf.WriteString(`,"time":`)
	writeString(&buf, e.Time.UTC().Format("2006-01-02T15:04:05.000000Z"))
	buf.WriteByte('}')
	return buf.Bytes()
}

func canonicalJSON(raw json.RawMessage) (json.RawMessage, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := writeCanonical(&buf, v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeCanonical writes v with object keys sorted by their UTF-16 code
// units' byte order (Go's string order, which equals it for the ASCII keys
// used here) and without HTML escaping.
func writeCanonical(buf *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeString(buf, k)
			buf.WriteByte(':')
			if err := writeCanonical(buf, x[k]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case []any:
		buf.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeCanonical(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case string:
		writeString(buf, x)
	case json.Number:
		buf.WriteString(x.String())
	case bool:
		buf.WriteString(strconv.FormatBool(x))
	case nil:
		buf.WriteString("null")
	default:
		return fmt.Errorf("canonical JSON: unexpected %T", v)
	}
	return nil
}

// writeString writes s as a JSON string, as encoding/json does without
// HTML escaping: printable ASCII other than the quote and the backslash
// as it is, anything else through the encoder.
func writeString(buf *bytes.Buffer, s string) {
	plain := true
	for i := 0; i < len(s) && plain; i++ {
		plain = s[i] >= 0x20 && s[i] < 0x7f && s[i] != '"' && s[i] != '\\'
	}
	if plain {
		buf.WriteByte('"')
		buf.WriteString(s)
		buf.WriteByte('"')
		return
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	buf.Write(bytes.TrimRight(b.Bytes(), "\n"))
}

// AuditHead is the last event of the chain: its sequence number and hash.
// The zero head (Seq 0, GenesisHash) is the head of an empty log.
type AuditHead struct {
	Seq  int64  `json:"seq"`
	Hash string `json:"hash"`
}

// EmptyHead is the head of an empty audit log.
func EmptyHead() AuditHead { return AuditHead{Seq: 0, Hash: GenesisHash} }

// AuditFilter selects audit events, oldest first, paged by sequence number.
type AuditFilter struct {
	Subject string
	Actor   string
	Action  string
	After   time.Time // time >= After
	Before  time.Time // time < Before
	Seq     int64     // seq > Seq: the last seq of the previous page
	Limit   int
}

// Validate checks f and fills the default limit.
func (f *AuditFilter) Validate() error {
	if err := pageLimit(&f.Limit); err != nil {
		return err
	}
	if f.Seq < 0 {
		return FieldErrorf(EINVALID, "cursor", "cursor must not be negative")
	}
	for _, s := range []struct{ n, v string }{{"message", f.Subject}, {"actor", f.Actor}, {"action", f.Action}} {
		if err := validateText(s.n, s.v); err != nil {
			return err
		}
	}
	return nil
}

// AuditVerification is the result of walking the chain. When OK is false,
// FirstBadSeq is the first sequence number that does not verify and Problem
// says why.
type AuditVerification struct {
	OK          bool      `json:"ok"`
	Checked     int64     `json:"checked"`
	Head        AuditHead `json:"head"`
	FirstBadSeq int64     `json:"first_bad_seq,omitempty"`
	Problem     string    `json:"problem,omitempty"`
}

// ChainVerifier walks an audit chain one event at a time, in sequence
// order. Stores feed it rows as they read them, so a chain of any length is
// verified in constant memory.
type ChainVerifier struct {
	prev   AuditHead
	expect []AuditHead
	end    *AuditHead
	result AuditVerification
	done   bool
}

// NewChainVerifier starts a walk at the genesis. Each head in expect (a
// head the service reported earlier, or the head the store keeps beside
// the log) must be on the chain: an event with its sequence number must
// exist and carry its hash. That is how a truncated tail, or a tail cut and
// rewritten, is found.
func NewChainVerifier(expect ...AuditHead) *ChainVerifier {
	return &ChainVerifier{prev: EmptyHead(), expect: expect}
}

// EndAt says the chain must end exactly at h: the head the store updates in
// the transaction of every append. An event beyond it was appended outside
// the service (a forged row, even one whose hash is right); a chain that
// ends before it lost its tail.
func (v *ChainVerifier) EndAt(h AuditHead) {
	v.end = &h
	v.expect = append(v.expect, h)
}

// Add checks the next event. It returns false once a problem was found;
// the caller may stop reading then.
func (v *ChainVerifier) Add(e *AuditEvent) bool {
	if v.done {
		return false
	}
	want := v.prev.Seq + 1
	switch {
	case v.end != nil && e.Seq > v.end.Seq:
		return v.fail(e.Seq, fmt.Sprintf("event %d is beyond the recorded head %d: it was appended outside the service", e.Seq, v.end.Seq))
	case e.Seq < want:
		return v.fail(want, fmt.Sprintf("sequence %d appears again or out of order after %d", e.Seq, v.prev.Seq))
	case e.Seq > want:
		return v.fail(want, fmt.Sprintf("sequence %d is missing: the next event is %d", want, e.Seq))
	case e.PrevHash != v.prev.Hash:
		return v.fail(e.Seq, "prev_hash does not equal the hash of the event before it")
	}
	h, err := e.ComputeHash()
	if err != nil {
		return v.fail(e.Seq, "details are not valid JSON")
	}
	if h != e.Hash {
		return v.fail(e.Seq, "stored hash does not match the event's content")
	}
	for _, x := range v.expect {
		if x.Seq == e.Seq && x.Hash != e.Hash {
			return v.fail(e.Seq, fmt.Sprintf("the hash at %d differs from the recorded head", e.Seq))
		}
	}
	v.prev = AuditHead{Seq: e.Seq, Hash: e.Hash}
	v.result.Checked++
	return true
}

func (v *ChainVerifier) fail(seq int64, problem string) bool {
	v.done = true
	v.result.FirstBadSeq = seq
	v.result.Problem = problem
	return false
}

// Finish returns the result of the walk.
func (v *ChainVerifier) Finish() AuditVerification {
	if !v.done {
		for _, x := range v.expect {
			if v.prev.Seq < x.Seq {
				v.fail(v.prev.Seq+1, fmt.Sprintf("the chain ends at %d but the recorded head is %d: events were removed from the tail", v.prev.Seq, x.Seq))
				break
			}
		}
	}
	r := v.result
	r.Head = v.prev
	r.OK = !v.done
	return r
}

// VerifyChain verifies a whole chain held in memory.
func VerifyChain(events []AuditEvent, expect ...AuditHead) AuditVerification {
	v := NewChainVerifier(expect...)
	for i := range events {
		if !v.Add(&events[i]) {
			break
		}
	}
	return v.Finish()
}

package quarantine

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// MaxReasonBytes caps a stored failure reason.
const MaxReasonBytes = 4096

// Flags mark what was wrong with a message as it arrived. The message is
// stored anyway; flags make the problem searchable.
const (
	FlagMissingIdempotencyKey = "missing_idempotency_key"
	FlagMalformed             = "malformed"         // the body was not a valid envelope or native form
	FlagInvalidUTF8           = "invalid_utf8"      // a text field or the body was not valid UTF-8
	FlagPayloadTooLarge       = "payload_too_large" // above the soft payload limit; stored raw
	FlagReasonTruncated       = "reason_truncated"  // the reason was cut to MaxReasonBytes
	FlagUnknownEnvelope       = "unknown_envelope"  // an envelope version this build does not know
	FlagMissingJobName        = "missing_job_name"
	FlagPayloadPurged         = "payload_purged" // retention removed the payload bytes; hashes remain
	// FlagNULReplaced: a text field (queue, job name, message id, reason…)
	// held NUL, which PostgreSQL text cannot hold: stored as U+2400 (␀) in
	// both stores, which answer alike.
	FlagNULReplaced = "nul_replaced"
	// FlagLoneSurrogate: a JSON text field held an unpaired UTF-16
	// surrogate escape (\ud800), which no UTF-8 text can hold: stored as
	// U+FFFD.
	FlagLoneSurrogate = "lone_surrogate"
	// FlagInvalidQueue: the queue the message named could not name a
	// broker's queue (see QueueNameProblem). It is not rewritten into one
	// that could: the message is stored without a queue, so that a replay
	// needs an explicit destination and never goes to a rewritten queue.
	FlagInvalidQueue = "invalid_queue"
)

// MaxQueueBytes is the longest queue name kept: AMQP 0-9-1 names are
// short strings of at most 255 bytes, SQS and NATS allow less.
const MaxQueueBytes = 255

// QueueNameProblem says why q could not name a queue on any broker this
// service replays to (not valid UTF-8, NUL or another control character,
// longer than MaxQueueBytes), or returns "" when it could ("" included:
// no queue).
func QueueNameProblem(q string) string {
	switch {
	case len(q) > MaxQueueBytes:
		return fmt.Sprintf("is longer than %d bytes", MaxQueueBytes)
	case !utf8.ValidString(q):
		return "is not valid UTF-8"
	}
	for _, r := range q {
		if unicode.IsControl(r) {
			if r == 0 {
				return "holds NUL"
			}
			return fmt.Sprintf("holds the control character %U", r)
		}
	}
	return ""
}

// Message is one dead letter in the quarantine.
//
// Payload holds the bytes exactly as received (or as last edited); the API
// shows them as JSON when they are JSON and as base64 otherwise.
type Message struct {
	ID             string     `json:"id"`
	Source         string     `json:"source"`
	SourceKind     SourceKind `json:"source_kind"`
	Queue          string     `json:"queue"`
	JobName        string     `json:"job_name"`
	MessageID      string     `json:"message_id"`
	IdempotencyKey string     `json:"idempotency_key"`
	// KeyRule says which rule produced IdempotencyKey when it was
	// collected: "envelope" (the message carried it), "header:NAME",
	// "pointer:PTR" (each with " prefix:P" when the rule has a prefix),
	// "none" (no rule applied to its queue), or "" (unknown: collected
	// before rules were recorded). A replay refuses a message whose rule
	// (other than envelope or unknown) differs from the rule configured
	// for its queue now (see ReplayRequest.Plan).
	KeyRule        string            `json:"key_rule"`
	SchemaVersion  string            `json:"schema_version"`
	Attempts       int               `json:"attempts"`
	FailureClass   FailureClass      `json:"failure_class"`
	Reason         string            `json:"reason"`
	Payload        []byte            `json:"-"`
	PayloadSize    int               `json:"payload_size"`
	ContentType    string            `json:"content_type"`
	PayloadSHA256  string            `json:"payload_sha256"`
	PayloadVersion int               `json:"payload_version"`
	Headers        map[string]string `json:"headers"`
	EnqueuedAt     *time.Time        `json:"enqueued_at"`
	FirstFailedAt  *time.Time        `json:"first_failed_at"`
	FailedAt       time.Time         `json:"failed_at"`
	CollectedAt    time.Time         `json:"collected_at"`
	UpdatedAt      time.Time         `json:"updated_at"`
	Status         Status            `json:"status"`
	Owner          string            `json:"owner"`
	Fingerprint    string            `json:"fingerprint"`
	ReplayCount    int               `json:"replay_count"`
	RefailOf       string            `json:"refail_of"`
	Flags          []string          `json:"flags"`

	// DedupeKey is unique per Source: the claim a collector makes so that a
	// redelivered broker message is stored once. Not shown on the API.
	DedupeKey string `json:"-"`
}

// HasFlag reports whether m carries flag f.
func (m *Message) HasFlag(f string) bool {
	for _, g := range m.Flags {
		if g == f {
			return true
		}
	}
	return false
}

// AddFlag adds f to m's flags once.
func (m *Message) AddFlag(f string) {
	if !m.HasFlag(f) {
		m.Flags = append(m.Flags, f)
	}
}

// PayloadHash returns the lowercase hex SHA-256 of b.
func PayloadHash(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Normalize fills what the store guarantees of every new message: an ID,
// the payload hash and size, version 1, status quarantined, the collection
// time, a failure time, a failure class, a fingerprint, and the flags for a
// missing key or an over-long reason. Text fields are made valid UTF-8
// without NUL so that every store accepts them, and flagged when that
// changed them (invalid_utf8, nul_replaced); a queue no broker could
// route is dropped and flagged invalid_queue rather than rewritten. The
// payload is never touched.
func (m *Message) Normalize(now time.Time) {
	now = now.UTC().Truncate(time.Microsecond)
	if m.ID == "" {
		m.ID = NewID(now)
	}
	m.PayloadSHA256 = PayloadHash(m.Payload)
	m.PayloadSize = len(m.Payload)
	if m.PayloadVersion == 0 {
		m.PayloadVersion = 1
	}
	if m.Status == "" {
		m.Status = StatusQuarantined
	}
	if m.CollectedAt.IsZero() {
		m.CollectedAt = now
	}
	m.CollectedAt = m.CollectedAt.UTC().Truncate(time.Microsecond)
	if m.FailedAt.IsZero() {
		m.FailedAt = m.CollectedAt
	}
	m.FailedAt = m.FailedAt.UTC().Truncate(time.Microsecond)
	m.UpdatedAt = m.CollectedAt
	m.EnqueuedAt = truncPtr(m.EnqueuedAt)
	m.FirstFailedAt = truncPtr(m.FirstFailedAt)
	if !m.FailureClass.Valid() {
		m.FailureClass = ClassUnknown
	}
	if QueueNameProblem(m.Queue) != "" {
		m.Queue = ""
		m.AddFlag(FlagInvalidQueue)
	}
	for _, p := range []*string{&m.Source, &m.JobName, &m.MessageID, &m.IdempotencyKey,
		&m.SchemaVersion, &m.ContentType, &m.Owner, &m.DedupeKey, &m.KeyRule, &m.Reason} {
		m.sanitize(p)
	}
	if len(m.Reason) > MaxReasonBytes {
		m.Reason = truncateUTF8(m.Reason, MaxReasonBytes)
		m.AddFlag(FlagReasonTruncated)
	}
	if len(m.Headers) > 0 {
		h := make(map[string]string, len(m.Headers))
		for k, v := range m.Headers {
			h[SanitizeText(k)] = SanitizeText(v)
		}
		m.Headers = h
	}
	if m.IdempotencyKey == "" {
		m.AddFlag(FlagMissingIdempotencyKey)
	}
	if m.Attempts < 0 {
		m.Attempts = 0
	}
	if m.Fingerprint == "" {
		m.Fingerprint = Fingerprint(m.JobName, m.FailureClass, m.Reason)
	}
	if m.Flags == nil {
		m.Flags = []string{}
	}
}

// sanitize makes *p valid UTF-8 without NUL, flagging what it changed.
func (m *Message) sanitize(p *string) {
	s := *p
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return
	}
	if !utf8.ValidString(s) {
		m.AddFlag(FlagInvalidUTF8)
	}
	if strings.IndexByte(s, 0) >= 0 {
		m.AddFlag(FlagNULReplaced)
	}
	*p = SanitizeText(s)
}

func truncPtr(t *time.Time) *time.Time {
	if t == nil || t.IsZero() {
		return nil
	}
	u := t.UTC().Truncate(time.Microsecond)
	return &u
}

// SanitizeText returns s as valid UTF-8 without NUL bytes: invalid bytes
// become U+FFFD and NUL becomes U+2400. Stored text fields go through it;
// payloads never do.
func SanitizeText(s string) string {
	if utf8.ValidString(s) && !strings.ContainsRune(s, 0) {
		return s
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.ReplaceAll(s, "\x00", "\u2400")
}

// truncateUTF8 cuts s to at most n bytes without splitting a rune.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Clip shortens untrusted input quoted back in an error message or a
// reason: made valid UTF-8 without NUL, then cut to 64 bytes (never inside
// a character) with "…" when it was longer. Every package quotes input
// through it.
func Clip(s string) string { return truncateForError(s) }

// truncateForError is Clip.
func truncateForError(s string) string {
	s = SanitizeText(s)
	if len(s) > 64 {
		return truncateUTF8(s, 64) + "…"
	}
	return s
}

// ClipReason returns s as a stored reason: sanitized (SanitizeText) and
// cut to MaxReasonBytes without splitting a rune.
func ClipReason(s string) string { return truncateUTF8(SanitizeText(s), MaxReasonBytes) }

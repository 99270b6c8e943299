package quarantine

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"strings"
	"time"
	"unicode/utf8"
)

// Page size limits for every list.
const (
	DefaultLimit = 50
	MaxLimit     = 1000
	// MaxFilterValue caps the length of one filter value in bytes.
	MaxFilterValue = 1024
	// MaxFilterValues caps how many values one filter field may list.
	MaxFilterValues = 100
)

// Filter selects messages. Fields within one slice are alternatives (OR);
// different fields all apply (AND). Zero values do not filter.
//
// Lists are ordered newest first by (failed_at, id) and paged by a keyset
// cursor, so a page deep in the set costs what the first page costs.
type Filter struct {
	Queue          []string
	JobName        []string
	FailureClass   []FailureClass
	Status         []Status
	Owner          []string
	Source         []string
	IdempotencyKey []string
	Fingerprint    []string  // failure groups
	FailedAfter    time.Time // failed_at >= FailedAfter
	FailedBefore   time.Time // failed_at < FailedBefore
	Text           string    // substring of the reason, job name or payload, Unicode case-insensitive (store/internal/search)

	After *Cursor // the last row of the previous page
	Limit int
}

// Cursor is a position in the (failed_at DESC, id DESC) order.
type Cursor struct {
	FailedAt time.Time `json:"t"`
	ID       string    `json:"i"`
}

// CursorOf returns the cursor that follows m.
func CursorOf(m *Message) *Cursor { return &Cursor{FailedAt: m.FailedAt, ID: m.ID} }

// Encode returns the opaque, URL-safe form of c.
func (c *Cursor) Encode() string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeCursor parses the opaque form made by Encode. Any other input is
// EINVALID naming the cursor parameter.
func DecodeCursor(s string) (*Cursor, error) {
	bad := FieldErrorf(EINVALID, "cursor", "cursor is not one this server issued")
	if len(s) > 256 {
		return nil, bad
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, bad
	}
	var c Cursor
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil || dec.More() || c.FailedAt.IsZero() || !ValidID(c.ID) {
		return nil, bad
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, bad
	}
	c.FailedAt = c.FailedAt.UTC()
	return &c, nil
}

// ValidateLimit checks a page size: EINVALID naming limit outside
// 1..MaxLimit.
func ValidateLimit(limit int) error {
	if limit < 1 || limit > MaxLimit {
		return FieldErrorf(EINVALID, "limit", "limit must be between 1 and %d", MaxLimit)
	}
	return nil
}

// pageLimit fills a zero page size with DefaultLimit, then checks it
// (ValidateLimit).
func pageLimit(limit *int) error {
	if *limit == 0 {
		*limit = DefaultLimit
	}
	return ValidateLimit(*limit)
}

// Validate checks f and fills the default limit. Errors are EINVALID and
// name the offending field.
func (f *Filter) Validate() error {
	if err := pageLimit(&f.Limit); err != nil {
		return err
	}
	for _, s := range []struct {
		name string
		vals []string
	}{{"queue", f.Queue}, {"job_name", f.JobName}, {"owner", f.Owner}, {"source", f.Source}, {"idempotency_key", f.IdempotencyKey}, {"fingerprint", f.Fingerprint}} {
		if err := validateValues(s.name, s.vals); err != nil {
			return err
		}
	}
	if len(f.Status) > MaxFilterValues || len(f.FailureClass) > MaxFilterValues {
		return FieldErrorf(EINVALID, "status", "too many values")
	}
	for _, st := range f.Status {
		if !st.Valid() {
			return FieldErrorf(EINVALID, "status", "unknown status %q", truncateForError(string(st)))
		}
	}
	for _, c := range f.FailureClass {
		if !c.Valid() {
			return FieldErrorf(EINVALID, "failure_class", "unknown failure class %q", truncateForError(string(c)))
		}
	}
	if err := validateText("q", f.Text); err != nil {
		return err
	}
	if !f.FailedAfter.IsZero() && !f.FailedBefore.IsZero() && !f.FailedAfter.Before(f.FailedBefore) {
		return FieldErrorf(EINVALID, "failed_after", "failed_after must be before failed_before")
	}
	return nil
}

func validateValues(name string, vals []string) error {
	if len(vals) > MaxFilterValues {
		return FieldErrorf(EINVALID, name, "at most %d values", MaxFilterValues)
	}
	for _, v := range vals {
		if err := validateText(name, v); err != nil {
			return err
		}
	}
	return nil
}

func validateText(name, v string) error {
	if len(v) > MaxFilterValue {
		return FieldErrorf(EINVALID, name, "value longer than %d bytes", MaxFilterValue)
	}
	if !utf8.ValidString(v) {
		return FieldErrorf(EINVALID, name, "value is not valid UTF-8")
	}
	if strings.ContainsRune(v, 0) {
		return FieldErrorf(EINVALID, name, "value contains a NUL character")
	}
	return nil
}

// MessagePage is one page of a message list. Next is nil on the last page.
type MessagePage struct {
	Messages []*Message
	Next     *Cursor
}

// QueueCount is the number of messages of one queue in one status.
type QueueCount struct {
	Queue  string `json:"queue"`
	Status Status `json:"status"`
	Count  int64  `json:"count"`
}

// QueueOldest is the oldest quarantined message of one queue, by failed_at.
type QueueOldest struct {
	Queue     string    `json:"queue"`
	MessageID string    `json:"message_id"`
	FailedAt  time.Time `json:"failed_at"`
}

// InsertResult says what InsertBatch did with one message: New is false
// when a message with the same source and dedupe key was already stored,
// and ID is then the stored message's ID.
type InsertResult struct {
	ID  string
	New bool
}

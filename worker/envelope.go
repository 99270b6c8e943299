package worker

import (
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/quarantine-dev/quarantine"
)

// maxReason caps the reason written to the failure envelope: compact, one
// line, valid UTF-8.
const maxReason = 1024

// envelope builds the canonical failure envelope for the delivery:
// job id, name, queue, idempotency key, schema version, attempts,
// timestamps, headers (less the worker's own bookkeeping), the payload as
// delivered, and the compact reason.
func (a *attempt) envelope(class, reason string) ([]byte, error) {
	d := a.d
	now := a.w.cfg.Now().UTC()
	m := &quarantine.Message{
		MessageID:      d.ID,
		JobName:        a.name,
		Queue:          d.Queue,
		IdempotencyKey: a.key,
		SchemaVersion:  d.Header(HeaderSchemaVersion),
		Attempts:       a.n,
		ContentType:    d.ContentType,
		FailureClass:   quarantine.FailureClass(class),
		Reason:         compact(reason, maxReason),
		FailedAt:       now,
	}
	if a.job != nil && a.job.Queue != "" {
		m.Queue = a.job.Queue
	}
	if !d.EnqueuedAt.IsZero() {
		t := d.EnqueuedAt.UTC()
		m.EnqueuedAt = &t
	} else if t, err := time.Parse(time.RFC3339Nano, d.Header(HeaderEnqueuedAt)); err == nil {
		t = t.UTC()
		m.EnqueuedAt = &t
	}
	first := now
	if t, err := time.Parse(time.RFC3339Nano, d.Header(HeaderFirstFailedAt)); err == nil {
		first = t.UTC()
	}
	m.FirstFailedAt = &first
	headers := make(map[string]string, len(d.Headers))
	for k, v := range d.Headers {
		if !bookkeeping(k) {
			headers[k] = v
		}
	}
	return quarantine.MarshalEnvelope(m, d.Body, headers)
}

// compact makes s one line of valid UTF-8, at most n bytes: control
// characters become spaces, runs of white space collapse.
func compact(s string, n int) string {
	var b strings.Builder
	space := false
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		if b.Len()+utf8.RuneLen(r) > n {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}

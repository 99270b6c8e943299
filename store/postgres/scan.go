package postgres

import (
	"encoding/json"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// messageRow receives the columns of messageColumns.
type messageRow struct {
	m              quarantine.Message
	headers, flags string
}

// dest returns the scan destinations in messageColumns order.
func (r *messageRow) dest() []any {
	m := &r.m
	return []any{&m.ID, &m.Source, &m.SourceKind, &m.Queue, &m.JobName, &m.MessageID,
		&m.IdempotencyKey, &m.SchemaVersion, &m.Attempts, &m.FailureClass, &m.Reason,
		&m.PayloadSize, &m.ContentType, &m.PayloadSHA256, &m.PayloadVersion, &r.headers,
		&m.EnqueuedAt, &m.FirstFailedAt, &m.FailedAt, &m.CollectedAt, &m.UpdatedAt,
		&m.Status, &m.Owner, &m.Fingerprint, &m.ReplayCount, &m.RefailOf, &r.flags, &m.DedupeKey, &m.KeyRule}
}

// message returns the scanned message with its JSON columns decoded and
// its times in UTC.
func (r *messageRow) message() (*quarantine.Message, error) {
	m := r.m
	if r.headers != "" && r.headers != "{}" {
		if err := json.Unmarshal([]byte(r.headers), &m.Headers); err != nil {
			return nil, quarantine.Internal(err, "message %s: headers are not a JSON object", m.ID)
		}
	}
	m.Flags = []string{}
	if r.flags != "" && r.flags != "[]" {
		if err := json.Unmarshal([]byte(r.flags), &m.Flags); err != nil {
			return nil, quarantine.Internal(err, "message %s: flags are not a JSON array", m.ID)
		}
	}
	m.EnqueuedAt = utcPtr(m.EnqueuedAt)
	m.FirstFailedAt = utcPtr(m.FirstFailedAt)
	m.FailedAt = m.FailedAt.UTC()
	m.CollectedAt = m.CollectedAt.UTC()
	m.UpdatedAt = m.UpdatedAt.UTC()
	return &m, nil
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

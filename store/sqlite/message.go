package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"unicode/utf8"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/notfound"
)

// messageColumns are the columns of a listed message, in scan order.
const messageColumns = `m.id, m.source, m.source_kind, m.queue, m.job_name, m.message_id, m.idempotency_key,
	m.schema_version, m.attempts, m.failure_class, m.reason, m.payload_size, m.content_type,
	m.payload_sha256, m.payload_version, m.headers, m.enqueued_at, m.first_failed_at, m.failed_at,
	m.collected_at, m.updated_at, m.status, m.owner, m.fingerprint, m.replay_count, m.refail_of, m.flags, m.key_rule`

const insertVersion = `INSERT INTO payload_versions (message_id, version, sha256, prev_sha256, size,
	content_type, actor, reason, created_at, payload, payload_text)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// collectorActor records who made version 1 of a collected payload.
const collectorActor = "collector"

// splitPayload returns the payload as the column that holds it: text when
// it is valid UTF-8 without NUL (searchable), bytes otherwise.
func splitPayload(p []byte) (blob, text any) {
	if utf8.Valid(p) && bytes.IndexByte(p, 0) < 0 {
		return nil, string(p)
	}
	return p, nil
}

// joinPayload is the inverse of splitPayload.
func joinPayload(blob []byte, text sql.NullString) []byte {
	if text.Valid {
		return []byte(text.String)
	}
	if blob == nil {
		return []byte{}
	}
	return blob
}

func encodeJSON(m *quarantine.Message) (headers, flags string, err error) {
	h := m.Headers
	if h == nil {
		h = map[string]string{}
	}
	hb, err := json.Marshal(h)
	if err != nil {
		return "", "", err
	}
	f := m.Flags
	if f == nil {
		f = []string{}
	}
	fb, err := json.Marshal(f)
	if err != nil {
		return "", "", err
	}
	return string(hb), string(fb), nil
}

// GetMessage returns one message with its current payload, or ENOTFOUND.
func (s *Store) GetMessage(ctx context.Context, id string) (*quarantine.Message, error) {
	if !quarantine.ValidID(id) {
		return nil, notfound.Message(id)
	}
	var m *quarantine.Message
	err := s.read(ctx, "read a message", func(tx *sql.Tx) error {
		var err error
		m, err = getMessage(ctx, tx, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// getMessage reads one message with its current payload in tx, or
// ENOTFOUND.
func getMessage(ctx context.Context, tx *sql.Tx, id string) (*quarantine.Message, error) {
	row := tx.QueryRowContext(ctx, `SELECT `+messageColumns+`, pv.payload, pv.payload_text
		FROM messages m JOIN payload_versions pv ON pv.message_id = m.id AND pv.version = m.payload_version
		WHERE m.id = ?`, id)
	var blob []byte
	var text sql.NullString
	m, err := scanMessage(row, &blob, &text)
	if err != nil {
		return nil, orNotFound(err, notfound.Message(id))
	}
	m.Payload = joinPayload(blob, text)
	return m, nil
}

// getMessages returns the messages of the leases, with their current
// payloads, by id: one query for any number.
func getMessages(ctx context.Context, tx *sql.Tx, ls []quarantine.ReplayLease) (map[string]*quarantine.Message, error) {
	ids := make([]string, len(ls))
	for i, l := range ls {
		ids[i] = l.Item.MessageID
	}
	rows, err := tx.QueryContext(ctx, `SELECT `+messageColumns+`, pv.payload, pv.payload_text
		FROM messages m JOIN payload_versions pv ON pv.message_id = m.id AND pv.version = m.payload_version
		WHERE m.id IN (SELECT value FROM json_each(?))`, jsonArray(ids))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[string]*quarantine.Message, len(ids))
	for rows.Next() {
		var blob []byte
		var text sql.NullString
		m, err := scanMessage(rows, &blob, &text)
		if err != nil {
			return nil, err
		}
		m.Payload = joinPayload(blob, text)
		out[m.ID] = m
	}
	return out, rows.Err()
}

type scanner interface{ Scan(dest ...any) error }

// scanMessage reads messageColumns, then extra destinations.
func scanMessage(r scanner, extra ...any) (*quarantine.Message, error) {
	var (
		m                    quarantine.Message
		kind, class, status  string
		headers, flags       string
		enqueued, firstFail  sql.NullInt64
		failed, coll, update int64
	)
	dest := []any{&m.ID, &m.Source, &kind, &m.Queue, &m.JobName, &m.MessageID, &m.IdempotencyKey,
		&m.SchemaVersion, &m.Attempts, &class, &m.Reason, &m.PayloadSize, &m.ContentType,
		&m.PayloadSHA256, &m.PayloadVersion, &headers, &enqueued, &firstFail, &failed,
		&coll, &update, &status, &m.Owner, &m.Fingerprint, &m.ReplayCount, &m.RefailOf, &flags, &m.KeyRule}
	if err := r.Scan(append(dest, extra...)...); err != nil {
		return nil, err
	}
	m.SourceKind, m.FailureClass, m.Status = quarantine.SourceKind(kind), quarantine.FailureClass(class), quarantine.Status(status)
	m.EnqueuedAt, m.FirstFailedAt = fromMicrosPtr(enqueued), fromMicrosPtr(firstFail)
	m.FailedAt, m.CollectedAt, m.UpdatedAt = fromMicros(failed), fromMicros(coll), fromMicros(update)
	if err := json.Unmarshal([]byte(headers), &m.Headers); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(flags), &m.Flags); err != nil {
		return nil, err
	}
	return &m, nil
}

package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"time"
	"unicode/utf8"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/notfound"
	"github.com/quarantine-dev/quarantine/store/internal/sampling"
)

// messageColumns are the columns of a listed message, in scan order.
const messageColumns = `m.id, m.source, m.source_kind, m.queue, m.job_name, m.message_id, m.idempotency_key,
	m.schema_version, m.attempts, m.failure_class, m.reason, m.payload_size, m.content_type,
	m.payload_sha256, m.payload_version, m.headers, m.enqueued_at, m.first_failed_at, m.failed_at,
	m.collected_at, m.updated_at, m.status, m.owner, m.fingerprint, m.replay_count, m.refail_of, m.flags, m.key_rule`

const insertMessage = `INSERT INTO messages (id, source, source_kind, queue, job_name, message_id,
	idempotency_key, schema_version, attempts, failure_class, reason, payload_size, content_type,
	payload_sha256, payload_version, headers, enqueued_at, first_failed_at, failed_at, collected_at,
	updated_at, status, owner, fingerprint, replay_count, refail_of, flags, dedupe_key, sample_rank, key_rule)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (source, dedupe_key) DO NOTHING`

const insertVersion = `INSERT INTO payload_versions (message_id, version, sha256, prev_sha256, size,
	content_type, actor, reason, created_at, payload, payload_text)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// collectorActor records who made version 1 of a collected payload.
const collectorActor = "collector"

// InsertBatch stores msgs in one transaction; see store.Store. A new
// message whose idempotency key is that of a replayed message re-failed
// from it: as if the batch were stored one message at a time, the first
// new message of a key links to the most recently failed replayed message
// of that key, the second to the next one, and so on; each linked message
// becomes refailed and the new one records it in RefailOf, in the same
// transaction. Errors:
// ECONFLICT when a message's ID is already taken by another message,
// EUNAVAILABLE when the database is busy or gone or ctx ends.
func (s *Store) InsertBatch(ctx context.Context, msgs []*quarantine.Message) ([]quarantine.InsertResult, error) {
	// The search indexer leaves the single writer to ingest (search.Pacer).
	s.inserted()
	defer s.inserted()
	out := make([]quarantine.InsertResult, len(msgs))
	now := s.clock()
	var links map[int]string // message index -> the replayed message it re-failed from
	err := s.write(ctx, "store messages", func(tx *sql.Tx) error {
		links = map[int]string{}
		ins, err := tx.PrepareContext(ctx, insertMessage)
		if err != nil {
			return err
		}
		defer ins.Close()
		ver, err := tx.PrepareContext(ctx, insertVersion)
		if err != nil {
			return err
		}
		defer ver.Close()
		replayed, err := lockReplayed(ctx, tx, msgs)
		if err != nil {
			return err
		}
		var fresh []int
		for i, m := range msgs {
			if m == nil {
				return quarantine.Errorf(quarantine.EINVALID, "message %d of the batch is missing", i)
			}
			r, err := insertOne(ctx, tx, ins, ver, m, now)
			if err != nil {
				return err
			}
			out[i] = r
			if r.New {
				fresh = append(fresh, i)
			}
			if rs := replayed[m.IdempotencyKey]; r.New && len(rs) > 0 {
				replayed[m.IdempotencyKey] = rs[1:]
				if err := refail(ctx, tx, m, rs[0], now); err != nil {
					return err
				}
				links[i] = rs[0]
			}
		}
		if err := queueSearch(ctx, tx, msgs, fresh); err != nil {
			return err
		}
		if err := foldGroups(ctx, tx, msgs, fresh); err != nil {
			return err
		}
		return foldInflow(ctx, tx, msgs, fresh)
	})
	if err != nil {
		return nil, err
	}
	for i, old := range links {
		msgs[i].RefailOf = old
	}
	return out, nil
}

// lockReplayed returns, per non-empty idempotency key of msgs, the IDs of
// the replayed messages holding it, most recently failed first (the write
// transaction holds the database's one write lock).
func lockReplayed(ctx context.Context, tx *sql.Tx, msgs []*quarantine.Message) (map[string][]string, error) {
	seen := map[string]bool{}
	var keys []string
	for _, m := range msgs {
		if m != nil && m.IdempotencyKey != "" && !seen[m.IdempotencyKey] {
			seen[m.IdempotencyKey] = true
			keys = append(keys, quarantine.SanitizeText(m.IdempotencyKey))
		}
	}
	if len(keys) == 0 {
		return nil, nil
	}
	rows, err := tx.QueryContext(ctx, `SELECT m.idempotency_key, m.id FROM messages m
		WHERE m.idempotency_key IN (SELECT value FROM json_each(?)) AND m.status IN ('replayed', 'replaying')
		ORDER BY m.idempotency_key, m.failed_at DESC, m.id DESC`, jsonArray(keys))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string][]string{}
	for rows.Next() {
		var key, id string
		if err := rows.Scan(&key, &id); err != nil {
			return nil, err
		}
		out[key] = append(out[key], id)
	}
	return out, rows.Err()
}

// refail records that the new message m re-failed from the replayed
// message old, which becomes refailed, as does the replay item that
// published it last.
func refail(ctx context.Context, tx *sql.Tx, m *quarantine.Message, old string, now time.Time) error {
	if _, err := tx.ExecContext(ctx, `UPDATE messages SET status = 'refailed', updated_at = ? WHERE id = ?`, micros(now), old); err != nil {
		return err
	}
	// The new entry carries the replays of its job so far, for the
	// replay cap.
	if _, err := tx.ExecContext(ctx, `UPDATE messages SET refail_of = ?1,
		replay_count = (SELECT replay_count FROM messages WHERE id = ?1) WHERE id = ?2`, old, m.ID); err != nil {
		return err
	}
	// The replay that published old: its latest published item re-failed.
	_, err := tx.ExecContext(ctx, `UPDATE replay_items SET outcome = 'refailed', refail_id = ?, updated_at = ?
		WHERE (batch_id, seq) = (SELECT batch_id, seq FROM replay_items WHERE message_id = ?
			AND outcome IN ('published', 'deduplicated') ORDER BY published_at DESC, batch_id DESC LIMIT 1)`,
		m.ID, micros(now), old)
	if err != nil {
		return err
	}
	// A message still replaying came back before its publish was
	// recorded: its pending item notes the new entry, and becomes
	// refailed when the publish is recorded.
	_, err = tx.ExecContext(ctx, `UPDATE replay_items SET refail_id = ?, updated_at = ?
		WHERE message_id = ? AND outcome = 'pending'`, m.ID, micros(now), old)
	return err
}

func insertOne(ctx context.Context, tx *sql.Tx, ins, ver *sql.Stmt, m *quarantine.Message, now time.Time) (quarantine.InsertResult, error) {
	m.Normalize(now)
	if m.DedupeKey == "" {
		m.DedupeKey = m.PayloadSHA256
	}
	headers, flags, err := encodeJSON(m)
	if err != nil {
		return quarantine.InsertResult{}, err
	}
	res, err := ins.ExecContext(ctx, m.ID, m.Source, string(m.SourceKind), m.Queue, m.JobName, m.MessageID,
		m.IdempotencyKey, m.SchemaVersion, m.Attempts, string(m.FailureClass), m.Reason, m.PayloadSize,
		m.ContentType, m.PayloadSHA256, m.PayloadVersion, headers, microsPtr(m.EnqueuedAt),
		microsPtr(m.FirstFailedAt), micros(m.FailedAt), micros(m.CollectedAt), micros(m.UpdatedAt),
		string(m.Status), m.Owner, m.Fingerprint, m.ReplayCount, m.RefailOf, flags, m.DedupeKey, sampling.Rank(), m.KeyRule)
	if err != nil {
		if isConstraint(err) {
			return quarantine.InsertResult{}, quarantine.Errorf(quarantine.ECONFLICT, "message id %s is already taken", m.ID)
		}
		return quarantine.InsertResult{}, err
	}
	if n, err := res.RowsAffected(); err != nil {
		return quarantine.InsertResult{}, err
	} else if n == 0 {
		var id string
		err := tx.QueryRowContext(ctx, `SELECT id FROM messages WHERE source = ? AND dedupe_key = ?`, m.Source, m.DedupeKey).Scan(&id)
		return quarantine.InsertResult{ID: id, New: false}, err
	}
	blob, text := splitPayload(m.Payload)
	_, err = ver.ExecContext(ctx, m.ID, m.PayloadVersion, m.PayloadSHA256, "", m.PayloadSize, m.ContentType,
		collectorActor, "collected", micros(now), blob, text)
	if err != nil {
		return quarantine.InsertResult{}, err
	}
	return quarantine.InsertResult{ID: m.ID, New: true}, nil
}

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

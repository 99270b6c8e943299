package sqlite

import (
	"context"
	"database/sql"
	"strings"
	"sync"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/replays"
	"github.com/quarantine-dev/quarantine/store/internal/sampling"
)

// messageInsertColumns are the columns InsertBatch writes, in the order
// of each message's arguments (insertMessages).
const messageInsertColumns = `id, source, source_kind, queue, job_name, message_id,
	idempotency_key, schema_version, attempts, failure_class, reason, payload_size, content_type,
	payload_sha256, payload_version, headers, enqueued_at, first_failed_at, failed_at, collected_at,
	updated_at, status, owner, fingerprint, replay_count, refail_of, flags, dedupe_key, sample_rank, key_rule,
	payload_purged`

// messageArgs and versionArgs are the arguments per row of the two
// INSERTs.
const (
	messageArgs = 31
	versionArgs = 11
)

// insertChunk is the most rows one INSERT writes: one statement per
// chunk instead of one per message (each statement costs a bind, a step
// and a reset through database/sql), well under SQLite's 32,766
// arguments.
const insertChunk = 100

// insertSQL caches the INSERT statements of n rows.
var insertSQL sync.Map // insertKey -> string

type insertKey struct {
	messages bool
	n        int
}

// insertStatement returns the INSERT of n messages (RETURNING the
// source, dedupe key and ID of each it stored) or of n payload versions.
func insertStatement(messages bool, n int) string {
	k := insertKey{messages, n}
	if q, ok := insertSQL.Load(k); ok {
		return q.(string)
	}
	var b strings.Builder
	args := versionArgs
	if messages {
		args = messageArgs
		b.WriteString("INSERT OR IGNORE INTO messages (" + messageInsertColumns + ") VALUES ")
	} else {
		b.WriteString(`INSERT INTO payload_versions (message_id, version, sha256, prev_sha256, size,
	content_type, actor, reason, created_at, payload, payload_text) VALUES `)
	}
	tuple := "(?" + strings.Repeat(", ?", args-1) + ")"
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(tuple)
	}
	if messages {
		// OR IGNORE skips a message whose dedupe key is stored already
		// (by an earlier batch or earlier in this one) or whose ID is
		// taken; insertMessages tells the two apart. A statement of
		// several rows that may fail half-way runs under a statement
		// journal: before it changes a page of messages or of one of its
		// indexes, SQLite copies the page there, in case the statement
		// must be undone alone (11% of BenchmarkInsertBatch1000's CPU).
		// With ON CONFLICT (source, dedupe_key) DO NOTHING a taken ID
		// aborts the statement, and so may a function in the condition
		// of a partial index of messages (migration 0012; tested by
		// TestMessageIndexConditionsCallNoFunction).
		b.WriteString(" RETURNING source, dedupe_key, id")
	}
	q := b.String()
	insertSQL.Store(k, q)
	return q
}

// row is what InsertBatch writes of one message, encoded before the
// write transaction starts so that the single writer only writes.
type row struct {
	headers, flags string
	rank           int64
	blob, text     any // splitPayload
}

// InsertBatch stores msgs in one transaction; see store.Store. A new
// message whose idempotency key is that of a replayed message re-failed
// from it: as if the batch were stored one message at a time, the first
// new message of a key links to the most recently failed replayed message
// of that key, the second to the next one, and so on; each linked message
// becomes refailed and the new one records it in RefailOf, in the same
// transaction. Messages are normalised and encoded before the write
// transaction, then written up to insertChunk per statement. Errors:
// EINVALID when one of msgs is nil, ECONFLICT when a message's ID is
// already taken by another message, EUNAVAILABLE when the database is busy
// or gone or ctx ends.
func (s *Store) InsertBatch(ctx context.Context, msgs []*quarantine.Message) ([]quarantine.InsertResult, error) {
	now := s.clock()
	rows := make([]row, len(msgs))
	for i, m := range msgs {
		if m == nil {
			return nil, quarantine.Errorf(quarantine.EINVALID, "message %d of the batch is missing", i)
		}
		r, err := prepareRow(m, now)
		if err != nil {
			return nil, err
		}
		rows[i] = r
	}
	// The search indexer leaves the single writer to ingest (search.Pacer).
	defer s.inserting()()
	out := make([]quarantine.InsertResult, len(msgs))
	var links map[int]string // message index -> the replayed message it re-failed from
	err := s.write(ctx, "store messages", func(tx *sql.Tx) error {
		links = map[int]string{}
		replayed, err := lockReplayed(ctx, tx, msgs)
		if err != nil {
			return err
		}
		fresh, err := insertMessages(ctx, tx, msgs, rows, out)
		if err != nil {
			return err
		}
		if err := insertVersions(ctx, tx, msgs, rows, fresh, now); err != nil {
			return err
		}
		for _, i := range fresh {
			m := msgs[i]
			if rs := replayed[m.IdempotencyKey]; len(rs) > 0 {
				replayed[m.IdempotencyKey] = rs[1:]
				if err := refail(ctx, tx, m, rs[0], now); err != nil {
					return err
				}
				links[i] = rs[0]
			}
		}
		if err := queueSearch(ctx, tx, msgs, rows, fresh); err != nil {
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

// prepareRow normalises m and encodes what its rows hold.
func prepareRow(m *quarantine.Message, now time.Time) (row, error) {
	m.Normalize(now)
	if m.DedupeKey == "" {
		m.DedupeKey = m.PayloadSHA256
	}
	headers, flags, err := encodeJSON(m)
	if err != nil {
		return row{}, err
	}
	blob, text := splitPayload(m.Payload)
	return row{headers: headers, flags: flags, rank: sampling.Rank(), blob: blob, text: text}, nil
}

// insertMessages inserts the messages rows of msgs in order, sets each
// result in out, and returns the indexes of the new ones in order. A
// duplicate's result names the stored message of its dedupe key.
func insertMessages(ctx context.Context, tx *sql.Tx, msgs []*quarantine.Message, rows []row, out []quarantine.InsertResult) ([]int, error) {
	stored := make(map[dedupe]string, len(msgs)) // the rows the INSERTs returned
	var stmt *sql.Stmt
	defer func() {
		if stmt != nil {
			stmt.Close()
		}
	}()
	args := make([]any, 0, min(len(msgs), insertChunk)*messageArgs)
	for at := 0; at < len(msgs); at += insertChunk {
		end := min(at+insertChunk, len(msgs))
		if stmt == nil || end-at != insertChunk {
			if stmt != nil {
				stmt.Close()
			}
			var err error
			if stmt, err = tx.PrepareContext(ctx, insertStatement(true, end-at)); err != nil {
				return nil, err
			}
		}
		args = args[:0]
		for i := at; i < end; i++ {
			m, r := msgs[i], &rows[i]
			args = append(args, m.ID, m.Source, string(m.SourceKind), m.Queue, m.JobName, m.MessageID,
				m.IdempotencyKey, m.SchemaVersion, m.Attempts, string(m.FailureClass), m.Reason, m.PayloadSize,
				m.ContentType, m.PayloadSHA256, m.PayloadVersion, r.headers, microsPtr(m.EnqueuedAt),
				microsPtr(m.FirstFailedAt), micros(m.FailedAt), micros(m.CollectedAt), micros(m.UpdatedAt),
				string(m.Status), m.Owner, m.Fingerprint, m.ReplayCount, m.RefailOf, r.flags, m.DedupeKey, r.rank, m.KeyRule,
				m.HasFlag(quarantine.FlagPayloadPurged))
		}
		if err := returnedIDs(ctx, stmt, args, stored); err != nil {
			return nil, err
		}
	}
	var fresh []int
	for i, m := range msgs {
		// Rows are inserted in the batch's order: of the messages of one
		// dedupe key, only the first can have been stored.
		k := dedupe{m.Source, m.DedupeKey}
		if id, ok := stored[k]; ok && id == m.ID {
			delete(stored, k)
			out[i] = quarantine.InsertResult{ID: m.ID, New: true}
			fresh = append(fresh, i)
			continue
		}
		// Not stored: a duplicate, or else its ID is taken (a message
		// with both a taken ID and a stored dedupe key is a duplicate, as
		// under ON CONFLICT (source, dedupe_key) DO NOTHING).
		var id string
		err := tx.QueryRowContext(ctx, `SELECT id FROM messages WHERE source = ? AND dedupe_key = ?`, m.Source, m.DedupeKey).Scan(&id)
		if noRows(err) {
			return nil, quarantine.Errorf(quarantine.ECONFLICT, "message id %s is already taken", m.ID)
		}
		if err != nil {
			return nil, err
		}
		out[i] = quarantine.InsertResult{ID: id, New: false}
	}
	return fresh, nil
}

// dedupe is the unique key of a stored message.
type dedupe struct{ source, key string }

// returnedIDs runs the INSERT … RETURNING of stmt and adds what it
// stored to stored.
func returnedIDs(ctx context.Context, stmt *sql.Stmt, args []any, stored map[dedupe]string) error {
	rs, err := stmt.QueryContext(ctx, args...)
	if err != nil {
		return err
	}
	defer rs.Close()
	for rs.Next() {
		var k dedupe
		var id string
		if err := rs.Scan(&k.source, &k.key, &id); err != nil {
			return err
		}
		stored[k] = id
	}
	return rs.Err()
}

// insertVersions inserts version 1 of the payloads of the new messages
// msgs[fresh].
func insertVersions(ctx context.Context, tx *sql.Tx, msgs []*quarantine.Message, rows []row, fresh []int, now time.Time) error {
	var stmt *sql.Stmt
	defer func() {
		if stmt != nil {
			stmt.Close()
		}
	}()
	args := make([]any, 0, min(len(fresh), insertChunk)*versionArgs)
	created := micros(now)
	for at := 0; at < len(fresh); at += insertChunk {
		end := min(at+insertChunk, len(fresh))
		if stmt == nil || end-at != insertChunk {
			if stmt != nil {
				stmt.Close()
			}
			var err error
			if stmt, err = tx.PrepareContext(ctx, insertStatement(false, end-at)); err != nil {
				return err
			}
		}
		args = args[:0]
		for _, i := range fresh[at:end] {
			m, r := msgs[i], &rows[i]
			args = append(args, m.ID, m.PayloadVersion, m.PayloadSHA256, "", m.PayloadSize, m.ContentType,
				collectorActor, "collected", created, r.blob, r.text)
		}
		res, err := stmt.ExecContext(ctx, args...)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n != int64(end-at) {
			return quarantine.Errorf(quarantine.EINTERNAL, "stored %d of %d payload versions", n, end-at)
		}
	}
	return nil
}

// lockReplayedSQL reads the messages lockReplayed returns, by their keys.
// The index of the keys is named: without statistics SQLite otherwise
// served the status condition's OR from the status index, reading every
// quarantined message for each insert (0.2 to 0.4 s per ingest at a
// million quarantined, while holding the one writer).
const lockReplayedSQL = `SELECT m.idempotency_key, m.id FROM messages m INDEXED BY messages_idempotency_key
	WHERE m.idempotency_key IN (SELECT value FROM json_each(?)) AND (m.status IN ('replayed', 'replaying')
		OR m.status = 'quarantined' AND EXISTS (SELECT 1 FROM replay_items
			WHERE replay_items.message_id = m.id AND ` + replays.InFlight + `))
	ORDER BY m.idempotency_key, m.failed_at DESC, m.id DESC`

// lockReplayed returns, per non-empty idempotency key of msgs, the IDs of
// the replayed messages holding it (or being replayed: held by a replay
// item in flight, replays.InFlight, or replaying, moved by an older
// version), most recently failed first (the write
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
	rows, err := tx.QueryContext(ctx, lockReplayedSQL, jsonArray(keys))
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
	// A message still in flight came back before its publish was
	// recorded: its pending item notes the new entry, and becomes
	// refailed when the publish is recorded.
	_, err = tx.ExecContext(ctx, `UPDATE replay_items SET refail_id = ?, updated_at = ?
		WHERE message_id = ? AND outcome = 'pending'`, m.ID, micros(now), old)
	return err
}

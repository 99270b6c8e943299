package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"strconv"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/ops"
	"github.com/quarantine-dev/quarantine/store/internal/search"
)

// The discard operations (quarantine.DiscardOperation). The set of an
// operation is the messages matching its filter with a rowid at most its
// mark, the largest rowid when it started (migration 0019). Each chunk is
// one write transaction: the single writer is free between chunks, so
// collectors store their batches while a large discard runs.

const discardOpColumns = `id, state, actor, reason, filter, mark, cursor, matched, discarded, skipped, error,
	started_at, updated_at, finished_at`

// andWhere adds conds to the WHERE clause w (possibly empty).
func andWhere(w string, conds string) string {
	if w == "" {
		return " WHERE " + conds
	}
	return w + " AND " + conds
}

// markRowid is the rowid of a mark (0, an empty set, if it is not one).
func markRowid(mark string) int64 {
	n, _ := strconv.ParseInt(mark, 10, 64)
	return n
}

// StartDiscard records a running discard operation; see store.Discards.
// The mark and the count are read from one snapshot, without the writer
// (ops.NewDiscard); once that read has ended, the operation is recorded
// in a short write.
func (s *Store) StartDiscard(ctx context.Context, d quarantine.Discard, confirmAbove int) (quarantine.DiscardOperation, error) {
	if err := s.searchReady(ctx, search.FilterText(d.Filter)); err != nil {
		return quarantine.DiscardOperation{}, err
	}
	now := s.clock()
	var op quarantine.DiscardOperation
	// Unmapped: the count walks the messages the filter matches, all of
	// them for an incident's discard.
	err := s.readUnmapped(ctx, "start a discard", func(tx *sql.Tx) error {
		var err error
		op, err = ops.NewDiscard(ctx, d, confirmAbove, quarantine.NewID(now), now, startRead{tx})
		return err
	})
	if err != nil {
		return op, err
	}
	f, err := json.Marshal(op.Filter)
	if err != nil {
		return op, err
	}
	err = s.write(ctx, "start a discard", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO discard_operations (id, state, actor, reason, filter, mark, matched, started_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, op.ID, op.State, op.Actor, op.Reason, string(f), op.Mark, op.Matched,
			micros(op.StartedAt), micros(op.UpdatedAt))
		return err
	})
	return op, err
}

// DiscardChunkMax is the most messages a background chunk of a discard
// operation holds (rules.ChunkSized); the runner sizes the chunks to
// about rules.DiscardChunkTarget below it.
func (s *Store) DiscardChunkMax() int { return 3000 }

// startRead is a read transaction of the store as the start of a discard
// operation reads it (ops.NewDiscard).
type startRead struct{ tx *sql.Tx }

var _ ops.StartReader = startRead{}

func (r startRead) Mark(ctx context.Context) (string, error) {
	var mark int64
	err := r.tx.QueryRowContext(ctx, `SELECT coalesce(max(rowid), 0) FROM messages`).Scan(&mark)
	return strconv.FormatInt(mark, 10), err
}

func (r startRead) Count(ctx context.Context, f quarantine.Filter, mark string) (n int64, err error) {
	w, args := where(f, false)
	err = r.tx.QueryRowContext(ctx, "SELECT count(*) FROM messages m"+andWhere(w, "m.rowid <= ?"),
		append(args, markRowid(mark))...).Scan(&n)
	return n, err
}

func (t opsTx) Lock(ctx context.Context, id string) (quarantine.DiscardOperation, error) {
	return getDiscard(ctx, t.tx, id)
}

// Select walks the set newest first, by (failed_at, id) as the message
// list pages it, through that index (INDEXED BY: a filter with an index
// of its own would otherwise sort the whole set again for every chunk).
// The cursor is the list's (quarantine.Cursor, encoded). A chunk's
// messages are then neighbours in every index that holds the status
// (status, queue-and-status, purge: all by failed_at after the status),
// so that its UPDATE rewrites a few pages of each instead of one page
// per message, whatever the order they were stored in. An operation
// started by an earlier version (its cursor is an id) goes on in id
// order (selectByID). The messages' rows are kept for MarkDiscardedFrom
// (selectChunk).
func (t opsTx) Select(ctx context.Context, op quarantine.DiscardOperation, limit int) ([]quarantine.Selected, string, bool, error) {
	f, byID := ops.Resume(op)
	if byID {
		return t.selectByID(ctx, op, limit)
	}
	w, args := where(f, true)
	sel, last, err := t.selectChunk(ctx, "SELECT "+selectedColumns+" FROM messages m INDEXED BY messages_failed_at"+
		andWhere(w, "m.rowid <= ?")+" ORDER BY m.failed_at DESC, m.id DESC LIMIT "+strconv.Itoa(limit),
		append(args, markRowid(op.Mark))...)
	if err != nil || len(sel) == 0 {
		return sel, op.Cursor, true, err
	}
	return sel, last.Encode(), len(sel) < limit, nil
}

// selectByID is Select in id order after the id op.Cursor, as earlier
// versions walked the set.
func (t opsTx) selectByID(ctx context.Context, op quarantine.DiscardOperation, limit int) ([]quarantine.Selected, string, bool, error) {
	w, args := where(op.Filter, false)
	sel, _, err := t.selectChunk(ctx, "SELECT "+selectedColumns+" FROM messages m INDEXED BY sqlite_autoindex_messages_1"+
		andWhere(w, "m.rowid <= ? AND m.id > ?")+" ORDER BY m.id LIMIT "+strconv.Itoa(limit),
		append(args, markRowid(op.Mark), op.Cursor)...)
	if err != nil || len(sel) == 0 {
		return sel, op.Cursor, true, err
	}
	return sel, sel[len(sel)-1].ID, len(sel) < limit, nil
}

// selectedColumns are the columns of a chunk's messages (selectChunk).
const selectedColumns = `m.id, m.status, m.failed_at, m.rowid, m.fingerprint, m.queue, m.owner, m.job_name,
	m.failure_class, m.reason`

// selectChunk runs query, which returns the selectedColumns of messages,
// and returns them as found, with the list's cursor of the last one; it
// keeps their rows in t: the row of each message is read anyway, and its
// status change needs their failure groups.
func (t opsTx) selectChunk(ctx context.Context, query string, args ...any) ([]quarantine.Selected, quarantine.Cursor, error) {
	var last quarantine.Cursor
	rows, err := t.tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, last, err
	}
	defer rows.Close()
	var out []quarantine.Selected
	for rows.Next() {
		m := quarantine.Selected{Found: true}
		var st string
		var r selectedRow
		if err := rows.Scan(&m.ID, &st, &r.At, &r.rowid, &r.F, &r.Q, &r.O, &r.Job, &r.Class, &r.Reason); err != nil {
			return nil, last, err
		}
		m.Status = quarantine.Status(st)
		out = append(out, m)
		r.ID = m.ID
		t.selected[m.ID] = r
		last = quarantine.Cursor{FailedAt: fromMicros(r.At), ID: m.ID}
	}
	return out, last, rows.Err()
}

// MarkDiscardedFrom moves the failure groups per group, not per message,
// and leaves the last bounds that moved for the end of the operation
// (moveSelected, replay_groups.go); each message's discard_seq is
// seq, the chunk's event (migration 0022). The messages are found by the
// rowids Select read in this transaction (ids are a chunk's, all
// selected by it).
func (t opsTx) MarkDiscardedFrom(ctx context.Context, from quarantine.Status, ids []string, seq int64) error {
	rowids := make([]int64, len(ids))
	moved := make([]movedRow, len(ids))
	for i, id := range ids {
		r, ok := t.selected[id]
		if !ok {
			return quarantine.Errorf(quarantine.EINTERNAL, "message %s was not selected by this chunk", id)
		}
		rowids[i], moved[i] = r.rowid, r.movedRow
	}
	b, err := json.Marshal(rowids)
	if err != nil {
		return err
	}
	return moveSelected(ctx, t.tx, string(b), moved, string(from), string(quarantine.StatusDiscarded),
		", discard_seq = "+strconv.FormatInt(seq, 10), micros(t.s.clock()))
}

// Save stores the operation's progress; an operation that is over
// (completed, or failed) has the last bounds of the failure groups its
// chunks left behind recounted (repairLastBounds), in the same
// transaction.
func (t opsTx) Save(ctx context.Context, op quarantine.DiscardOperation) error {
	if op.State != quarantine.DiscardRunning {
		if err := repairLastBounds(ctx, t.tx); err != nil {
			return err
		}
	}
	_, err := t.tx.ExecContext(ctx, `UPDATE discard_operations SET state = ?, cursor = ?, discarded = ?, skipped = ?,
		error = ?, updated_at = ?, finished_at = ? WHERE id = ?`,
		op.State, op.Cursor, op.Discarded, op.Skipped, op.Error, micros(op.UpdatedAt), microsPtr(op.FinishedAt), op.ID)
	return err
}

// FailDiscard ends a running discard operation as failed; see
// store.Discards.
func (s *Store) FailDiscard(ctx context.Context, id, reason string) error {
	return s.write(ctx, "fail a discard", func(tx *sql.Tx) error {
		if _, err := getDiscard(ctx, tx, id); err != nil {
			return err
		}
		if err := repairLastBounds(ctx, tx); err != nil {
			return err
		}
		now := micros(s.clock())
		_, err := tx.ExecContext(ctx, `UPDATE discard_operations SET state = ?, error = ?, updated_at = ?, finished_at = ?
			WHERE id = ? AND state = ?`, quarantine.DiscardFailed, reason, now, now, id, quarantine.DiscardRunning)
		return err
	})
}

// GetDiscard returns one discard operation; see store.Discards.
func (s *Store) GetDiscard(ctx context.Context, id string) (op quarantine.DiscardOperation, err error) {
	err = s.read(ctx, "read a discard", func(tx *sql.Tx) error {
		op, err = getDiscard(ctx, tx, id)
		return err
	})
	return op, err
}

// RunningDiscards returns the running discard operations; see
// store.Discards.
func (s *Store) RunningDiscards(ctx context.Context) ([]quarantine.DiscardOperation, error) {
	var out []quarantine.DiscardOperation
	err := s.read(ctx, "list running discards", func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, "SELECT "+discardOpColumns+" FROM discard_operations WHERE state = ? ORDER BY id",
			quarantine.DiscardRunning)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			op, err := scanDiscard(rows)
			if err != nil {
				return err
			}
			out = append(out, op)
		}
		return rows.Err()
	})
	return out, err
}

// getDiscard reads the discard operation id.
func getDiscard(ctx context.Context, tx *sql.Tx, id string) (quarantine.DiscardOperation, error) {
	return scanDiscard(tx.QueryRowContext(ctx, "SELECT "+discardOpColumns+" FROM discard_operations WHERE id = ?", id))
}

// scanDiscard reads one discard_operations row.
func scanDiscard(row interface{ Scan(...any) error }) (quarantine.DiscardOperation, error) {
	var op quarantine.DiscardOperation
	var filter string
	var started, updated int64
	var finished sql.NullInt64
	err := row.Scan(&op.ID, &op.State, &op.Actor, &op.Reason, &filter, &op.Mark, &op.Cursor, &op.Matched,
		&op.Discarded, &op.Skipped, &op.Error, &started, &updated, &finished)
	if err != nil {
		return op, err
	}
	op.StartedAt, op.UpdatedAt, op.FinishedAt = fromMicros(started), fromMicros(updated), fromMicrosPtr(finished)
	return op, json.Unmarshal([]byte(filter), &op.Filter)
}

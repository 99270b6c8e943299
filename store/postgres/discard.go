package postgres

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/ops"
	"github.com/quarantine-dev/quarantine/store/internal/search"
)

// opsTx is one write transaction of the store as the shared operator
// actions (store/internal/ops: a discard, a chunk of a discard operation,
// an edit, a re-key) use it.
type opsTx struct{ replayTx }

// WriteOps runs fn in a transaction of the store (ops.Methods).
func (p backend) WriteOps(ctx context.Context, what string, fn func(ops.Tx) error) error {
	return p.s.inTx(ctx, what, func(tx pgx.Tx) error { return fn(opsTx{replayTx{p.s, tx}}) })
}

func (t opsTx) SelectFilter(ctx context.Context, f quarantine.Filter, limit int) ([]quarantine.Selected, error) {
	return lockFilter(ctx, t.tx, f, limit)
}

func (t opsTx) CountFilter(ctx context.Context, f quarantine.Filter) (n int64, err error) {
	w := filterWhere(&f)
	err = t.tx.QueryRow(ctx, "SELECT count(*) FROM messages m"+w.sql(), w.args...).Scan(&n)
	return n, err
}

func (t opsTx) SelectIDs(ctx context.Context, ids []string) (map[string]quarantine.Status, error) {
	return lockIDs(ctx, t.tx, ids)
}

func (t opsTx) MarkDiscarded(ctx context.Context, ids []string) error {
	return t.s.markDiscarded(ctx, t.tx, ids)
}

// markDiscarded sets the status of ids to discarded, now.
func (s *Store) markDiscarded(ctx context.Context, tx pgx.Tx, ids []string) error {
	_, err := tx.Exec(ctx, `UPDATE messages SET status = 'discarded', updated_at = $2 WHERE id = ANY($1::text[])`, ids, s.clock())
	return err
}

// lockIDs locks the messages of ids, in id order, and returns their
// statuses.
func lockIDs(ctx context.Context, tx pgx.Tx, ids []string) (map[string]quarantine.Status, error) {
	rows, err := tx.Query(ctx, `SELECT id, status FROM messages WHERE id = ANY($1::text[]) ORDER BY id FOR UPDATE`, ids)
	if err != nil {
		return nil, err
	}
	status := map[string]quarantine.Status{}
	var id string
	var st quarantine.Status
	_, err = pgx.ForEachRow(rows, []any{&id, &st}, func() error {
		status[id] = st
		return nil
	})
	return status, err
}

// lockFilter locks up to limit messages matching f, in id order.
func lockFilter(ctx context.Context, tx pgx.Tx, f quarantine.Filter, limit int) ([]quarantine.Selected, error) {
	w := filterWhere(&f)
	return lockSelected(ctx, tx, "SELECT m.id, m.status FROM messages m"+w.sql()+
		" ORDER BY m.id LIMIT "+strconv.Itoa(limit)+" FOR UPDATE", w.args...)
}

// lockSelected runs query, which locks and returns the id and status of
// messages, and returns them as found.
func lockSelected(ctx context.Context, tx pgx.Tx, query string, args ...any) ([]quarantine.Selected, error) {
	rows, err := tx.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	var out []quarantine.Selected
	var m quarantine.Selected
	_, err = pgx.ForEachRow(rows, []any{&m.ID, &m.Status}, func() error {
		m.Found = true
		out = append(out, m)
		return nil
	})
	return out, err
}

// The discard operations (quarantine.DiscardOperation). The set of an
// operation is the messages matching its filter that were committed when
// it started: its mark is the text of the pg_snapshot taken then, and a
// message belongs to the set when its insert_xid (the transaction that
// stored it, migration 0019) is visible in that snapshot. Each chunk
// locks the operation row first, so two processes resuming the same
// operation apply its chunks one after the other, never twice.

const discardOpColumns = `id, state, actor, reason, filter, mark, cursor, matched, discarded, skipped, error,
	started_at, updated_at, finished_at`

// inDiscardSet is the condition of the set of the operation whose mark is
// argument ref.
func inDiscardSet(ref string) string {
	return "(m.insert_xid IS NULL OR pg_visible_in_snapshot(m.insert_xid, " + ref + "::pg_snapshot))"
}

// DiscardChunkTarget is how long a background chunk of a discard
// operation may take (rules.ChunkPaced): a chunk locks the rows that
// collectors' inserts also write (failure_groups, waiting_minutes) only
// from its status change to its commit, and each chunk pays its
// statement triggers and round trips once whatever its size, so chunks
// of up to the runner's most (2,000) are cheaper per message than the
// few hundred that SQLite's 150 ms allow.
func (s *Store) DiscardChunkTarget() time.Duration { return time.Second }

// StartDiscard records a running discard operation; see store.Discards.
// The mark, the count and the record are one transaction.
func (s *Store) StartDiscard(ctx context.Context, d quarantine.Discard, confirmAbove int) (quarantine.DiscardOperation, error) {
	if err := s.searchReady(ctx, search.FilterText(d.Filter)); err != nil {
		return quarantine.DiscardOperation{}, err
	}
	now := s.clock()
	var op quarantine.DiscardOperation
	err := s.inTx(ctx, "start a discard", func(tx pgx.Tx) error {
		var err error
		op, err = ops.StartDiscard(ctx, d, confirmAbove, quarantine.NewID(now), now, startTx{tx})
		return err
	})
	return op, err
}

// startTx is the transaction that starts a discard operation
// (ops.StartDiscard).
type startTx struct{ tx pgx.Tx }

var _ ops.StartTx = startTx{}

func (t startTx) Mark(ctx context.Context) (mark string, err error) {
	err = t.tx.QueryRow(ctx, `SELECT pg_current_snapshot()::text`).Scan(&mark)
	return mark, err
}

func (t startTx) Count(ctx context.Context, f quarantine.Filter, mark string) (n int64, err error) {
	w := filterWhere(&f)
	w.conds = append(w.conds, inDiscardSet(w.arg(mark)))
	err = t.tx.QueryRow(ctx, "SELECT count(*) FROM messages m"+w.sql(), w.args...).Scan(&n)
	return n, err
}

func (t startTx) Insert(ctx context.Context, op quarantine.DiscardOperation) error {
	f, err := json.Marshal(op.Filter)
	if err != nil {
		return err
	}
	_, err = t.tx.Exec(ctx, `INSERT INTO discard_operations (id, state, actor, reason, filter, mark, matched, started_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)`, op.ID, op.State, op.Actor, op.Reason, string(f), op.Mark, op.Matched, op.StartedAt)
	return err
}

// Lock reads the operation id, locking its row (a chunk, a resume).
func (t opsTx) Lock(ctx context.Context, id string) (quarantine.DiscardOperation, error) {
	return getDiscard(ctx, t.tx, "WHERE id = $1 FOR UPDATE", id)
}

// Select walks the set newest first, by (failed_at, id) as the message
// list pages it; the cursor is the list's (quarantine.Cursor, encoded).
// A chunk's messages are then neighbours in every index of messages that
// has failed_at after a column of few values (failed_at, queue,
// queue-and-status, status, owner, job name, failure class, and inflow's
// collected_at, which follows failed_at), so that its UPDATE writes a few
// pages of each instead of one page per message, whatever the order the
// messages were stored in. The chunk is read in that order, then locked
// in id order as every writer of several messages locks them (a second
// statement, which checks the filter again on what it locked: a message
// whose status moved meanwhile out of the filter is left alone). An
// operation started by an earlier version (its cursor is an id) goes on
// in id order (selectByID).
func (t opsTx) Select(ctx context.Context, op quarantine.DiscardOperation, limit int) ([]quarantine.Selected, string, bool, error) {
	f, byID := ops.Resume(op)
	if byID {
		return t.selectByID(ctx, op, limit)
	}
	w := filterWhere(&f)
	w.after(f.After)
	w.conds = append(w.conds, inDiscardSet(w.arg(op.Mark)))
	rows, err := t.tx.Query(ctx, "SELECT m.id, m.failed_at FROM messages m"+w.sql()+
		" ORDER BY m.failed_at DESC, m.id DESC LIMIT "+strconv.Itoa(limit), w.args...)
	if err != nil {
		return nil, "", false, err
	}
	var ids []string
	var last quarantine.Cursor
	_, err = pgx.ForEachRow(rows, []any{&last.ID, &last.FailedAt}, func() error {
		ids = append(ids, last.ID)
		return nil
	})
	if err != nil || len(ids) == 0 {
		return nil, op.Cursor, true, err
	}
	f.After = nil
	lw := filterWhere(&f)
	lw.conds = append(lw.conds, "m.id = ANY("+lw.arg(ids)+"::text[])")
	sel, err := lockSelected(ctx, t.tx, "SELECT m.id, m.status FROM messages m"+lw.sql()+" ORDER BY m.id FOR UPDATE", lw.args...)
	return sel, last.Encode(), len(ids) < limit, err
}

// selectByID is Select in id order after the id op.Cursor, as earlier
// versions walked the set.
func (t opsTx) selectByID(ctx context.Context, op quarantine.DiscardOperation, limit int) ([]quarantine.Selected, string, bool, error) {
	f := op.Filter
	w := filterWhere(&f)
	w.conds = append(w.conds, inDiscardSet(w.arg(op.Mark)), "m.id > "+w.arg(op.Cursor))
	sel, err := lockSelected(ctx, t.tx, "SELECT m.id, m.status FROM messages m"+w.sql()+
		" ORDER BY m.id LIMIT "+strconv.Itoa(limit)+" FOR UPDATE", w.args...)
	if err != nil || len(sel) == 0 {
		return sel, op.Cursor, true, err
	}
	return sel, sel[len(sel)-1].ID, len(sel) < limit, nil
}

// MarkDiscardedFrom marks ids discarded with the last bounds of the
// failure groups they leave left for the end of the operation
// (quarantine.last_bounds_later, migration 0023): walked newest first,
// every chunk takes the latest message of nearly every group it touches.
// Their counts and first bounds stay exact.
// Each message's discard_seq is seq, the chunk's event (migration 0024).
func (t opsTx) MarkDiscardedFrom(ctx context.Context, _ quarantine.Status, ids []string, seq int64) error {
	if _, err := t.tx.Exec(ctx, `SELECT set_config('quarantine.last_bounds_later', 'on', true)`); err != nil {
		return err
	}
	_, err := t.tx.Exec(ctx, `UPDATE messages SET status = 'discarded', updated_at = $2, discard_seq = $3
		WHERE id = ANY($1::text[])`, ids, t.s.clock(), seq)
	return err
}

// repairLastBounds recounts the last bound and example of every failure
// group whose example left it, inside tx (migration 0023).
func repairLastBounds(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `SELECT quarantine_repair_last_bounds()`)
	return err
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
	_, err := t.tx.Exec(ctx, `UPDATE discard_operations SET state = $2, cursor = $3, discarded = $4, skipped = $5,
		error = $6, updated_at = $7, finished_at = $8 WHERE id = $1`,
		op.ID, op.State, op.Cursor, op.Discarded, op.Skipped, op.Error, op.UpdatedAt, op.FinishedAt)
	return err
}

// FailDiscard ends a running discard operation as failed; see
// store.Discards.
func (s *Store) FailDiscard(ctx context.Context, id, reason string) error {
	return s.inTx(ctx, "fail a discard", func(tx pgx.Tx) error {
		now := s.clock()
		tag, err := tx.Exec(ctx, `UPDATE discard_operations SET state = $2, error = $3, updated_at = $4, finished_at = $4
			WHERE id = $1 AND state = $5`, id, quarantine.DiscardFailed, reason, now, quarantine.DiscardRunning)
		if err == nil && tag.RowsAffected() == 0 {
			_, err = getDiscard(ctx, tx, "WHERE id = $1", id) // ENOTFOUND, or no longer running: nothing to do
			return err
		}
		if err != nil {
			return err
		}
		return repairLastBounds(ctx, tx)
	})
}

// GetDiscard returns one discard operation; see store.Discards.
func (s *Store) GetDiscard(ctx context.Context, id string) (op quarantine.DiscardOperation, err error) {
	err = s.inTx(ctx, "read a discard", func(tx pgx.Tx) error {
		op, err = getDiscard(ctx, tx, "WHERE id = $1", id)
		return err
	})
	return op, err
}

// RunningDiscards returns the running discard operations; see
// store.Discards.
func (s *Store) RunningDiscards(ctx context.Context) ([]quarantine.DiscardOperation, error) {
	rows, err := s.pool.Query(ctx, "SELECT "+discardOpColumns+" FROM discard_operations WHERE state = $1 ORDER BY id",
		quarantine.DiscardRunning)
	if err != nil {
		return nil, translate(err, "list running discards")
	}
	out, err := pgx.CollectRows(rows, scanDiscard)
	return out, translate(err, "list running discards")
}

// getDiscard reads the one discard operation the clause selects.
func getDiscard(ctx context.Context, tx pgx.Tx, clause string, args ...any) (quarantine.DiscardOperation, error) {
	rows, err := tx.Query(ctx, "SELECT "+discardOpColumns+" FROM discard_operations "+clause, args...)
	if err != nil {
		return quarantine.DiscardOperation{}, err
	}
	return pgx.CollectExactlyOneRow(rows, scanDiscard)
}

// scanDiscard reads one discard_operations row.
func scanDiscard(row pgx.CollectableRow) (quarantine.DiscardOperation, error) {
	var op quarantine.DiscardOperation
	var filter string
	err := row.Scan(&op.ID, &op.State, &op.Actor, &op.Reason, &filter, &op.Mark, &op.Cursor, &op.Matched,
		&op.Discarded, &op.Skipped, &op.Error, &op.StartedAt, &op.UpdatedAt, &op.FinishedAt)
	if err != nil {
		return op, err
	}
	op.StartedAt, op.UpdatedAt = op.StartedAt.UTC(), op.UpdatedAt.UTC()
	if op.FinishedAt != nil {
		t := op.FinishedAt.UTC()
		op.FinishedAt = &t
	}
	return op, json.Unmarshal([]byte(filter), &op.Filter)
}

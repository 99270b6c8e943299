package sqlite

import (
	"context"
	"database/sql"
	"strconv"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/ops"
)

// opsTx is one write transaction of the store as the shared operator
// actions (store/internal/ops: a discard, a chunk of a discard operation,
// an edit, a re-key) use it. SQLite has one writer: a discard operation is
// locked by the transaction itself.
type opsTx struct {
	replayTx
	// selected are the messages Select returned, by id: a chunk's status
	// change finds them by row and knows their groups
	// (MarkDiscardedFrom).
	selected map[string]selectedRow
}

// selectedRow is a message of a chunk as its status change needs it.
type selectedRow struct {
	rowid int64
	movedRow
}

// WriteOps runs fn in a write transaction (ops.Methods).
func (p backend) WriteOps(ctx context.Context, what string, fn func(ops.Tx) error) error {
	return p.s.write(ctx, what, func(tx *sql.Tx) error {
		return fn(opsTx{replayTx: replayTx{p.s, tx}, selected: map[string]selectedRow{}})
	})
}

func (t opsTx) SelectFilter(ctx context.Context, f quarantine.Filter, limit int) ([]quarantine.Selected, error) {
	return selectFilter(ctx, t.tx, f, limit)
}

func (t opsTx) CountFilter(ctx context.Context, f quarantine.Filter) (n int64, err error) {
	w, args := where(f, false)
	err = t.tx.QueryRowContext(ctx, "SELECT count(*) FROM messages m"+w, args...).Scan(&n)
	return n, err
}

func (t opsTx) SelectIDs(ctx context.Context, ids []string) (map[string]quarantine.Status, error) {
	return selectIDs(ctx, t.tx, ids)
}

func (t opsTx) MarkDiscarded(ctx context.Context, ids []string) error {
	return t.s.markDiscarded(ctx, t.tx, ids)
}

// markDiscarded sets the status of ids to discarded, now. OR ROLLBACK:
// any failure ends the transaction, as a failed write does anyway, and
// SQLite then keeps no statement journal (migration 0021).
func (s *Store) markDiscarded(ctx context.Context, tx *sql.Tx, ids []string) error {
	_, err := tx.ExecContext(ctx, `UPDATE OR ROLLBACK messages SET status = 'discarded', updated_at = ?
		WHERE id IN (SELECT value FROM json_each(?))`, micros(s.clock()), jsonArray(ids))
	return err
}

// selectIDs returns the status of each of ids that names a message.
func selectIDs(ctx context.Context, tx *sql.Tx, ids []string) (map[string]quarantine.Status, error) {
	rows, err := tx.QueryContext(ctx, `SELECT id, status FROM messages WHERE id IN (SELECT value FROM json_each(?))`, jsonArray(ids))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	status := map[string]quarantine.Status{}
	for rows.Next() {
		var id, st string
		if err := rows.Scan(&id, &st); err != nil {
			return nil, err
		}
		status[id] = quarantine.Status(st)
	}
	return status, rows.Err()
}

// selectFilter returns up to limit messages matching f, in id order.
func selectFilter(ctx context.Context, tx *sql.Tx, f quarantine.Filter, limit int) ([]quarantine.Selected, error) {
	w, args := where(f, false)
	return querySelected(ctx, tx, "SELECT m.id, m.status FROM messages m"+w+" ORDER BY m.id LIMIT "+strconv.Itoa(limit), args...)
}

// querySelected runs query, which returns the id and status of messages,
// and returns them as found.
func querySelected(ctx context.Context, tx *sql.Tx, query string, args ...any) ([]quarantine.Selected, error) {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []quarantine.Selected
	for rows.Next() {
		var m quarantine.Selected
		var st string
		if err := rows.Scan(&m.ID, &st); err != nil {
			return nil, err
		}
		m.Status, m.Found = quarantine.Status(st), true
		out = append(out, m)
	}
	return out, rows.Err()
}

package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"strconv"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/ops"
)

// Discard marks the selected messages discarded; see store.Store. The
// selection, the status rule (quarantine.Status.Transition) and the
// change happen in one write transaction, with one message.discard event
// per change. Errors: EINVALID or EUNPROCESSABLE for a bad request,
// EUNPROCESSABLE when a filter matches more than quarantine.MaxBulk
// messages, ECONFLICT when d.ExpectCount is not the matched count,
// EUNAVAILABLE.
func (s *Store) Discard(ctx context.Context, d quarantine.Discard) (quarantine.BulkResult, error) {
	if err := ops.CheckDiscard(d); err != nil {
		return quarantine.BulkResult{}, err
	}
	if err := s.searchReady(ctx, filterText(d.Filter)); err != nil {
		return quarantine.BulkResult{}, err
	}
	var res quarantine.BulkResult
	err := s.write(ctx, "discard messages", func(tx *sql.Tx) error {
		var err error
		res, err = ops.Discard(d, ops.DiscardTx{
			SelectFilter: func(f quarantine.Filter) ([]quarantine.Selected, error) { return selectFilter(ctx, tx, f) },
			SelectIDs:    func(ids []string) ([]quarantine.Selected, error) { return selectIDs(ctx, tx, ids) },
			MarkDiscarded: func(ids []string) error {
				_, err := tx.ExecContext(ctx, `UPDATE messages SET status = 'discarded', updated_at = ?
					WHERE id IN (SELECT value FROM json_each(?))`, micros(s.clock()), jsonArray(ids))
				return err
			},
			Audit: func(events []*quarantine.AuditEvent) error { return s.appendAudits(ctx, tx, events) },
		})
		return err
	})
	if err != nil {
		return quarantine.BulkResult{}, err
	}
	return res, nil
}

// jsonArray encodes ids for json_each: one parameter for any number of ids.
func jsonArray(ids []string) string {
	b, _ := json.Marshal(ids) // strings always marshal
	return string(b)
}

// selectIDs returns one entry per distinct ID, in the order given.
func selectIDs(ctx context.Context, tx *sql.Tx, ids []string) ([]quarantine.Selected, error) {
	status := map[string]quarantine.Status{}
	if valid := ops.ValidIDs(ids); len(valid) > 0 {
		rows, err := tx.QueryContext(ctx, `SELECT id, status FROM messages WHERE id IN (SELECT value FROM json_each(?))`, jsonArray(valid))
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		for rows.Next() {
			var id, st string
			if err := rows.Scan(&id, &st); err != nil {
				return nil, err
			}
			status[id] = quarantine.Status(st)
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return ops.Selection(ids, status), nil
}

// selectFilter returns the messages matching f in id order, refusing a
// filter that matches more than quarantine.MaxBulk of them.
func selectFilter(ctx context.Context, tx *sql.Tx, f quarantine.Filter) ([]quarantine.Selected, error) {
	f.After, f.Limit = nil, 1
	if err := f.Validate(); err != nil {
		return nil, err
	}
	w, args := where(f, false)
	rows, err := tx.QueryContext(ctx, "SELECT m.id, m.status FROM messages m"+w+
		" ORDER BY m.id LIMIT "+strconv.Itoa(quarantine.MaxBulk+1), args...)
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
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(out) > quarantine.MaxBulk {
		var n int64
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM messages m"+w, args...).Scan(&n); err != nil {
			return nil, err
		}
		return nil, ops.TooMany(n)
	}
	return out, nil
}

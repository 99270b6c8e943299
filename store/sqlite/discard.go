package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"strconv"

	"github.com/quarantine-dev/quarantine"
)

// Discard marks the selected messages discarded; see store.Store. The
// selection, the status rule (quarantine.Status.Transition) and the
// change happen in one write transaction, with one message.discard event
// per change. Errors: EINVALID or EUNPROCESSABLE for a bad request,
// EUNPROCESSABLE when a filter matches more than quarantine.MaxBulk
// messages, ECONFLICT when d.ExpectCount is not the matched count,
// EUNAVAILABLE.
func (s *Store) Discard(ctx context.Context, d quarantine.Discard) (quarantine.BulkResult, error) {
	if err := d.Validate(); err != nil {
		return quarantine.BulkResult{}, err
	}
	if d.Actor == "" {
		return quarantine.BulkResult{}, quarantine.Errorf(quarantine.EINTERNAL, "a discard needs an actor")
	}
	if err := s.searchReady(ctx, filterText(d.Filter)); err != nil {
		return quarantine.BulkResult{}, err
	}
	var res quarantine.BulkResult
	err := s.write(ctx, "discard messages", func(tx *sql.Tx) error {
		var sel []quarantine.Selected
		var err error
		if d.Filter != nil {
			sel, err = selectFilter(ctx, tx, *d.Filter)
		} else {
			sel, err = selectIDs(ctx, tx, d.IDs)
		}
		if err != nil {
			return err
		}
		var events []*quarantine.AuditEvent
		if res, events, err = d.Plan(sel); err != nil {
			return err
		}
		if len(res.Changed) == 0 {
			return s.appendAudits(ctx, tx, events) // refusals only, if any
		}
		if _, err := tx.ExecContext(ctx, `UPDATE messages SET status = 'discarded', updated_at = ?
			WHERE id IN (SELECT value FROM json_each(?))`, micros(s.clock()), jsonArray(res.Changed)); err != nil {
			return err
		}
		return s.appendAudits(ctx, tx, events)
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
	var valid []string
	for _, id := range ids {
		if quarantine.ValidID(id) {
			valid = append(valid, id)
		}
	}
	status := map[string]quarantine.Status{}
	if len(valid) > 0 {
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
	seen := map[string]bool{}
	var out []quarantine.Selected
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		st, ok := status[id]
		out = append(out, quarantine.Selected{ID: quarantine.SanitizeText(id), Status: st, Found: ok})
	}
	return out, nil
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
		return nil, quarantine.FieldErrorf(quarantine.EUNPROCESSABLE, "filter",
			"the filter matches %d messages; at most %d can be changed at once", n, quarantine.MaxBulk)
	}
	return out, nil
}

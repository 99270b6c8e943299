package postgres

import (
	"context"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/quarantine-dev/quarantine"
)

// Discard marks the selected messages discarded; see store.Store. The
// selected rows are locked in id order (SELECT … FOR UPDATE) before their
// statuses are read, so a concurrent replay or edit waits or is waited
// for, and the status rule (quarantine.Status.Transition) is applied to
// what is really stored. Every change has its own message.discard event,
// appended in bulk in the same transaction. Errors: EINVALID or
// EUNPROCESSABLE for a bad request, EUNPROCESSABLE when a filter matches
// more than quarantine.MaxBulk messages, ECONFLICT when d.ExpectCount is
// not the matched count, EUNAVAILABLE, EINTERNAL.
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
	err := s.inTx(ctx, "discard messages", func(tx pgx.Tx) error {
		var sel []quarantine.Selected
		var err error
		if d.Filter != nil {
			sel, err = lockFilter(ctx, tx, *d.Filter)
		} else {
			sel, err = lockIDs(ctx, tx, d.IDs)
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
		if _, err := tx.Exec(ctx, `UPDATE messages SET status = 'discarded', updated_at = $2 WHERE id = ANY($1::text[])`,
			res.Changed, s.clock()); err != nil {
			return err
		}
		return s.appendAudits(ctx, tx, events)
	})
	if err != nil {
		return quarantine.BulkResult{}, err
	}
	return res, nil
}

// lockIDs locks the messages with the given IDs, in id order, and returns
// one entry per distinct ID in the order given (found false when none).
func lockIDs(ctx context.Context, tx pgx.Tx, ids []string) ([]quarantine.Selected, error) {
	var valid []string
	for _, id := range ids {
		if quarantine.ValidID(id) {
			valid = append(valid, id)
		}
	}
	status := map[string]quarantine.Status{}
	if len(valid) > 0 {
		rows, err := tx.Query(ctx, `SELECT id, status FROM messages WHERE id = ANY($1::text[]) ORDER BY id FOR UPDATE`, valid)
		if err != nil {
			return nil, err
		}
		var id string
		var st quarantine.Status
		if _, err := pgx.ForEachRow(rows, []any{&id, &st}, func() error {
			status[id] = st
			return nil
		}); err != nil {
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

// lockFilter locks the messages matching f, in id order, refusing a
// filter that matches more than quarantine.MaxBulk of them.
func lockFilter(ctx context.Context, tx pgx.Tx, f quarantine.Filter) ([]quarantine.Selected, error) {
	f.After, f.Limit = nil, 1
	if err := f.Validate(); err != nil {
		return nil, err
	}
	w := filterWhere(&f)
	rows, err := tx.Query(ctx, "SELECT m.id, m.status FROM messages m"+w.sql()+
		" ORDER BY m.id LIMIT "+strconv.Itoa(quarantine.MaxBulk+1)+" FOR UPDATE", w.args...)
	if err != nil {
		return nil, err
	}
	var out []quarantine.Selected
	var m quarantine.Selected
	if _, err := pgx.ForEachRow(rows, []any{&m.ID, &m.Status}, func() error {
		m.Found = true
		out = append(out, m)
		return nil
	}); err != nil {
		return nil, err
	}
	if len(out) > quarantine.MaxBulk {
		var n int64
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM messages m"+w.sql(), w.args...).Scan(&n); err != nil {
			return nil, err
		}
		return nil, quarantine.FieldErrorf(quarantine.EUNPROCESSABLE, "filter",
			"the filter matches %d messages; at most %d can be changed at once", n, quarantine.MaxBulk)
	}
	return out, nil
}

package postgres

import (
	"context"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/ops"
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
	if err := ops.CheckDiscard(d); err != nil {
		return quarantine.BulkResult{}, err
	}
	if err := s.searchReady(ctx, filterText(d.Filter)); err != nil {
		return quarantine.BulkResult{}, err
	}
	var res quarantine.BulkResult
	err := s.inTx(ctx, "discard messages", func(tx pgx.Tx) error {
		var err error
		res, err = ops.Discard(d, ops.DiscardTx{
			SelectFilter: func(f quarantine.Filter) ([]quarantine.Selected, error) { return lockFilter(ctx, tx, f) },
			SelectIDs:    func(ids []string) ([]quarantine.Selected, error) { return lockIDs(ctx, tx, ids) },
			MarkDiscarded: func(ids []string) error {
				_, err := tx.Exec(ctx, `UPDATE messages SET status = 'discarded', updated_at = $2 WHERE id = ANY($1::text[])`,
					ids, s.clock())
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

// lockIDs locks the messages with the given IDs, in id order, and returns
// one entry per distinct ID in the order given (found false when none).
func lockIDs(ctx context.Context, tx pgx.Tx, ids []string) ([]quarantine.Selected, error) {
	status := map[string]quarantine.Status{}
	if valid := ops.ValidIDs(ids); len(valid) > 0 {
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
	return ops.Selection(ids, status), nil
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
		return nil, ops.TooMany(n)
	}
	return out, nil
}

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
			SelectFilter: func(f quarantine.Filter, limit int) ([]quarantine.Selected, error) {
				return lockFilter(ctx, tx, f, limit)
			},
			CountFilter: func(f quarantine.Filter) (n int64, err error) {
				w := filterWhere(&f)
				err = tx.QueryRow(ctx, "SELECT count(*) FROM messages m"+w.sql(), w.args...).Scan(&n)
				return n, err
			},
			SelectIDs: func(ids []string) (map[string]quarantine.Status, error) { return lockIDs(ctx, tx, ids) },
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
	rows, err := tx.Query(ctx, "SELECT m.id, m.status FROM messages m"+w.sql()+
		" ORDER BY m.id LIMIT "+strconv.Itoa(limit)+" FOR UPDATE", w.args...)
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

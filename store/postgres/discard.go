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
	var res quarantine.BulkResult
	err := s.inTx(ctx, "discard messages", func(tx pgx.Tx) error {
		var sel []selected
		var err error
		res = quarantine.BulkResult{Changed: []string{}, Skipped: []quarantine.BulkSkipped{}}
		if d.Filter != nil {
			sel, err = lockFilter(ctx, tx, *d.Filter)
		} else {
			sel, err = lockIDs(ctx, tx, d.IDs)
		}
		if err != nil {
			return err
		}
		for _, m := range sel {
			if m.found {
				res.Matched++
			}
		}
		if d.ExpectCount != nil && *d.ExpectCount != res.Matched {
			return quarantine.FieldErrorf(quarantine.ECONFLICT, "expect_count",
				"the selection matches %d messages now, not the %d expected; nothing was discarded", res.Matched, *d.ExpectCount)
		}
		var events []*quarantine.AuditEvent
		for _, m := range sel {
			if reason := skipReason(m, quarantine.StatusDiscarded); reason != "" {
				res.Skipped = append(res.Skipped, quarantine.BulkSkipped{ID: m.id, Reason: reason})
				continue
			}
			res.Changed = append(res.Changed, m.id)
			ev := quarantine.NewAuditEvent(d.Actor, quarantine.ActionDiscard, m.id, map[string]string{
				"reason": d.Reason, "previous_status": string(m.status),
			})
			events = append(events, &ev)
		}
		if len(res.Changed) == 0 {
			return nil
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

// selected is a message a bulk action selected, as locked.
type selected struct {
	id     string
	status quarantine.Status
	found  bool
}

// skipReason says why m cannot become next, or "" when it can.
func skipReason(m selected, next quarantine.Status) string {
	switch {
	case !m.found:
		return "not found"
	case m.status == next:
		return "already " + string(next)
	}
	if err := m.status.Transition(next); err != nil {
		return quarantine.ErrorMessage(err)
	}
	return ""
}

// lockIDs locks the messages with the given IDs, in id order, and returns
// one entry per distinct ID in the order given (found false when none).
func lockIDs(ctx context.Context, tx pgx.Tx, ids []string) ([]selected, error) {
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
	var out []selected
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		st, ok := status[id]
		out = append(out, selected{id: quarantine.SanitizeText(id), status: st, found: ok})
	}
	return out, nil
}

// lockFilter locks the messages matching f, in id order, refusing a
// filter that matches more than quarantine.MaxBulk of them.
func lockFilter(ctx context.Context, tx pgx.Tx, f quarantine.Filter) ([]selected, error) {
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
	var out []selected
	var m selected
	if _, err := pgx.ForEachRow(rows, []any{&m.id, &m.status}, func() error {
		m.found = true
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

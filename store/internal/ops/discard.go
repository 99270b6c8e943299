package ops

import (
	"context"

	"github.com/quarantine-dev/quarantine"
)

// DiscardTx is what the discard flow (Discard) needs of a store's
// transaction: select (and lock, where the store locks rows) the
// messages, mark the changed ones discarded, and append the audit events.
type DiscardTx interface {
	Holds
	// SelectFilter returns up to limit messages matching f (a valid
	// filter without cursor), in id order, with their statuses.
	SelectFilter(ctx context.Context, f quarantine.Filter, limit int) ([]quarantine.Selected, error)
	// CountFilter counts the messages matching f; called only when f
	// matches more than quarantine.MaxBulk, for the refusal.
	CountFilter(ctx context.Context, f quarantine.Filter) (int64, error)
	// SelectIDs returns the status of each of ids (valid message ids,
	// distinct) that names a message.
	SelectIDs(ctx context.Context, ids []string) (map[string]quarantine.Status, error)
	// MarkDiscarded sets the status of ids to discarded, now.
	MarkDiscarded(ctx context.Context, ids []string) error
	// AppendAudits appends events in the same transaction.
	AppendAudits(ctx context.Context, events []*quarantine.AuditEvent) error
}

// CheckDiscard checks d before any transaction: a valid request
// (d.Validate) with an actor (a wiring bug otherwise: EINTERNAL).
func CheckDiscard(d quarantine.Discard) error {
	if err := d.Validate(); err != nil {
		return err
	}
	if d.Actor == "" {
		return quarantine.Errorf(quarantine.EINTERNAL, "a discard needs an actor")
	}
	return nil
}

// Discard runs d inside a store's transaction: the selection by filter or
// by ids, the status rule and the expected count (d.Plan, on what is
// really stored), the change, and one message.discard event per change
// (plus the refusals) in the same transaction.
func Discard(ctx context.Context, d quarantine.Discard, tx DiscardTx) (quarantine.BulkResult, error) {
	var sel []quarantine.Selected
	var err error
	if d.Filter != nil {
		sel, err = selectFilter(ctx, *d.Filter, tx)
	} else {
		sel, err = selectIDs(ctx, d.IDs, tx)
	}
	if err == nil {
		err = markHeld(ctx, sel, tx)
	}
	if err != nil {
		return quarantine.BulkResult{}, err
	}
	res, events, err := d.Plan(sel)
	if err != nil {
		return quarantine.BulkResult{}, err
	}
	if len(res.Changed) > 0 {
		if err := tx.MarkDiscarded(ctx, res.Changed); err != nil {
			return quarantine.BulkResult{}, err
		}
	}
	if err := tx.AppendAudits(ctx, events); err != nil { // refusals only, when nothing changed
		return quarantine.BulkResult{}, err
	}
	return res, nil
}

// selectFilter selects the messages matching f, refusing a filter that
// matches more than quarantine.MaxBulk of them (EUNPROCESSABLE naming
// filter, with the count).
func selectFilter(ctx context.Context, f quarantine.Filter, tx DiscardTx) ([]quarantine.Selected, error) {
	f.After, f.Limit = nil, 1
	if err := f.Validate(); err != nil {
		return nil, err
	}
	sel, err := tx.SelectFilter(ctx, f, quarantine.MaxBulk+1)
	if err != nil || len(sel) <= quarantine.MaxBulk {
		return sel, err
	}
	n, err := tx.CountFilter(ctx, f)
	if err != nil {
		return nil, err
	}
	return nil, TooMany(n)
}

// selectIDs returns one entry per distinct id, in the order given.
func selectIDs(ctx context.Context, ids []string, tx DiscardTx) ([]quarantine.Selected, error) {
	status := map[string]quarantine.Status{}
	if valid := ValidIDs(ids); len(valid) > 0 {
		var err error
		if status, err = tx.SelectIDs(ctx, valid); err != nil {
			return nil, err
		}
	}
	return Selection(ids, status), nil
}

// Selection returns one entry per distinct id of ids, in the order given,
// with the status a store read for it (found false when it has none).
func Selection(ids []string, status map[string]quarantine.Status) []quarantine.Selected {
	seen := make(map[string]bool, len(ids))
	var out []quarantine.Selected
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		st, ok := status[id]
		out = append(out, quarantine.Selected{ID: quarantine.SanitizeText(id), Status: st, Found: ok})
	}
	return out
}

// ValidIDs returns the distinct ids that can name a message, for a
// store's query; the others are reported not found by Selection.
func ValidIDs(ids []string) []string {
	var out []string
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if quarantine.ValidID(id) && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// TooMany is the error of a filter that matches n messages, more than
// quarantine.MaxBulk.
func TooMany(n int64) error {
	return quarantine.FieldErrorf(quarantine.EUNPROCESSABLE, "filter",
		"the filter matches %d messages; at most %d can be changed at once", n, quarantine.MaxBulk)
}

// OwnersQuery starts a store's MessageOwners of ids: the map to fill,
// and the ids to query (the distinct ones that can name a message; none
// when there is nothing to read).
func OwnersQuery(ids []string) (map[string]string, []string) {
	return make(map[string]string, len(ids)), ValidIDs(ids)
}

// ReadOwners reads the id and owner of each row of a query into out.
func ReadOwners(rows Rows, out map[string]string) error {
	for rows.Next() {
		var id, owner string
		if err := rows.Scan(&id, &owner); err != nil {
			return err
		}
		out[id] = owner
	}
	return rows.Err()
}

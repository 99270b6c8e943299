package ops

import "github.com/quarantine-dev/quarantine"

// DiscardTx is what a store does inside its discard transaction: select
// (and lock, where the store locks rows) the messages, mark the changed
// ones discarded, and append the audit events.
type DiscardTx struct {
	// SelectFilter returns the messages matching f in id order (at most
	// quarantine.MaxBulk, else EUNPROCESSABLE naming filter).
	SelectFilter func(f quarantine.Filter) ([]quarantine.Selected, error)
	// SelectIDs returns one entry per distinct id, in the order given.
	SelectIDs func(ids []string) ([]quarantine.Selected, error)
	// MarkDiscarded sets the status of ids to discarded, now.
	MarkDiscarded func(ids []string) error
	// Audit appends the events in the same transaction.
	Audit func(events []*quarantine.AuditEvent) error
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
func Discard(d quarantine.Discard, tx DiscardTx) (quarantine.BulkResult, error) {
	var sel []quarantine.Selected
	var err error
	if d.Filter != nil {
		sel, err = tx.SelectFilter(*d.Filter)
	} else {
		sel, err = tx.SelectIDs(d.IDs)
	}
	if err != nil {
		return quarantine.BulkResult{}, err
	}
	res, events, err := d.Plan(sel)
	if err != nil {
		return quarantine.BulkResult{}, err
	}
	if len(res.Changed) > 0 {
		if err := tx.MarkDiscarded(res.Changed); err != nil {
			return quarantine.BulkResult{}, err
		}
	}
	if err := tx.Audit(events); err != nil { // refusals only, when nothing changed
		return quarantine.BulkResult{}, err
	}
	return res, nil
}

// Selection returns one entry per distinct id of ids, in the order given,
// with the status a store read for it (found false when it has none):
// the rule both stores' SelectIDs follow after their query.
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

// ValidIDs returns the ids that can name a message, for a store's query;
// the others are reported not found by Selection.
func ValidIDs(ids []string) []string {
	var out []string
	for _, id := range ids {
		if quarantine.ValidID(id) {
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

package rules

import (
	"context"
	"slices"
	"strconv"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store"
)

// The rules of the bulk actions, shared by the API and the web UI, so
// that a discard from a browser goes through the same checks, scoping and
// audit events as one through the API.

// skipNotFound is the skip reason of an id that names no message the
// token may see (the store says the same of unknown ids).
const skipNotFound = "not found"

// DiscardAs discards the messages d selects (d.Actor is set to t's
// actor) within the owners of token t, through st.Discard: an id outside
// them is skipped as "not found", like an unknown one, and the attempt is
// audited (access.denied with method and path); a filter is narrowed to
// them. A selection left empty by the scoping with a non-zero
// expect_count is ECONFLICT. d must pass d.Validate. The errors are the
// store's (ECONFLICT when expect_count does not hold, EUNPROCESSABLE above
// quarantine.MaxBulk).
func DiscardAs(ctx context.Context, st store.Store, t *quarantine.Token, d quarantine.Discard, method, path string) (quarantine.BulkResult, error) {
	d.Actor = t.Actor()
	res := quarantine.BulkResult{Changed: []string{}, Skipped: []quarantine.BulkSkipped{}}
	var foreign []string
	var err error
	if d.Filter != nil && !Scope(t, d.Filter) {
		d.Filter = nil // only other teams' owners were asked for: nothing matches
	}
	if len(d.IDs) > 0 && len(t.Owners) > 0 {
		if d.IDs, foreign, err = OwnIDs(ctx, st, t, d.IDs); err != nil {
			return res, err
		}
	}
	if len(foreign) > 0 {
		ev := quarantine.NewAuditEvent(t.Actor(), quarantine.ActionAccessDenied, ClipPath(path), map[string]any{
			"method": quarantine.Clip(method), "path": ClipPath(path), "ids": foreign,
			"reason": "the messages are outside the token's owners"})
		if _, err := st.AppendAudit(ctx, ev); err != nil {
			return res, err
		}
	}
	if len(d.IDs) > 0 || d.Filter != nil {
		if res, err = st.Discard(ctx, d); err != nil {
			return res, InBody(err, "")
		}
	} else if d.ExpectCount != nil && *d.ExpectCount != 0 {
		return res, quarantine.FieldErrorf(quarantine.ECONFLICT, "/expect_count",
			"the selection matches 0 messages, not %d: nothing was discarded", *d.ExpectCount)
	}
	for _, id := range foreign {
		res.Skipped = append(res.Skipped, quarantine.BulkSkipped{ID: id, Reason: skipNotFound})
	}
	if res.Changed == nil {
		res.Changed = []string{}
	}
	if res.Skipped == nil {
		res.Skipped = []quarantine.BulkSkipped{}
	}
	return res, nil
}

// OwnIDs splits ids into those of messages the token may see and the
// others, with one store query for all of them (no payload is read).
// Unknown ids stay with the first: the store skips them.
func OwnIDs(ctx context.Context, st store.Store, t *quarantine.Token, ids []string) (own, foreign []string, err error) {
	owners, err := st.MessageOwners(ctx, ids)
	if err != nil {
		return nil, nil, err
	}
	for _, id := range ids {
		if owner, ok := owners[id]; !ok || t.Sees(owner) {
			own = append(own, id)
		} else {
			foreign = append(foreign, id)
		}
	}
	return own, foreign, nil
}

// CleanIDs checks the ids of a bulk action (at most quarantine.MaxBulk,
// each a message id: EINVALID naming /ids or /ids/N otherwise) and drops
// repeats, in linear time.
func CleanIDs(ids []string) ([]string, error) {
	if len(ids) > quarantine.MaxBulk {
		return nil, quarantine.FieldErrorf(quarantine.EINVALID, "/ids", "at most %d ids at once", quarantine.MaxBulk)
	}
	var out []string
	seen := make(map[string]bool, len(ids))
	for i, id := range ids {
		if !quarantine.ValidID(id) {
			return nil, quarantine.FieldErrorf(quarantine.EINVALID, "/ids/"+strconv.Itoa(i), "%q is not a message id", quarantine.Clip(id))
		}
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out, nil
}

// DiscardVisible reports whether token t may see operation op: a token
// without owners sees every one; one with owners those it started and
// those whose filter names only owners among its own.
func DiscardVisible(t *quarantine.Token, op quarantine.DiscardOperation) bool {
	if len(t.Owners) == 0 || op.Actor == t.Actor() {
		return true
	}
	return len(op.Filter.Owner) > 0 && !slices.ContainsFunc(op.Filter.Owner, func(o string) bool { return !t.Sees(o) })
}

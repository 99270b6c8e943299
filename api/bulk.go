package api

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store"
)

// The rules of the bulk actions, exported for the web UI, so that a
// discard from a browser goes through the same checks, scoping and audit
// events as one through the API.

// FilterParams returns the names of the message filter's query
// parameters (queue, job_name, …, q), as GET /api/v1/messages takes them.
func FilterParams() []string { return slices.Clone(filterParams) }

// FilterFromValues parses the message filter parameters of v, named as on
// the API (FilterParams; other parameters are ignored), older_than
// counting back from now; empty reports whether the filter selects every
// message. Errors are EINVALID naming the parameter.
func FilterFromValues(v url.Values, now time.Time) (f quarantine.Filter, empty bool, err error) {
	in, err := filterFromQuery(query{v: v})
	if err != nil {
		return f, false, err
	}
	f, err = in.filter(now, "")
	return f, in.empty(), err
}

// Scope restricts f to the owners of t, when it has any (an owner asked
// for outside them is dropped). It returns false when f asked only for
// owners outside them: then nothing can match.
func Scope(t *quarantine.Token, f *quarantine.Filter) bool { return scope(t, f) }

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
	if d.Filter != nil && !scope(t, d.Filter) {
		d.Filter = nil // only other teams' owners were asked for: nothing matches
	}
	if len(d.IDs) > 0 && len(t.Owners) > 0 {
		if d.IDs, foreign, err = splitOwn(ctx, st, t, d.IDs); err != nil {
			return res, err
		}
	}
	if len(foreign) > 0 {
		ev := quarantine.NewAuditEvent(t.Actor(), quarantine.ActionAccessDenied, clipPath(path), map[string]any{
			"method": clip(method), "path": clipPath(path), "ids": foreign,
			"reason": "the messages are outside the token's owners"})
		if _, err := st.AppendAudit(ctx, ev); err != nil {
			return res, err
		}
	}
	if len(d.IDs) > 0 || d.Filter != nil {
		if res, err = st.Discard(ctx, d); err != nil {
			return res, inBody(err, "")
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

// ownIDs splits ids into those of messages the token may see and the
// others (splitOwn).
func (s *Server) ownIDs(r *http.Request, t *quarantine.Token, ids []string) (own, foreign []string, err error) {
	return splitOwn(r.Context(), s.cfg.Store, t, ids)
}

// splitOwn splits ids into those of messages the token may see and the
// others, with one store query for all of them (no payload is read).
// Unknown ids stay with the first: the store skips them.
func splitOwn(ctx context.Context, st store.Store, t *quarantine.Token, ids []string) (own, foreign []string, err error) {
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

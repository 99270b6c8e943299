package api

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/rules"
)

// errNoReplay answers an unknown batch, and one the token may not see.
var errNoReplay = quarantine.FieldErrorf(quarantine.ENOTFOUND, "id", "no replay with this id")

// loadReplay returns the batch named by the route's id, when the token
// may see it; otherwise it answers 404 (and false). On a write route
// (write set), an attempt on a batch the token may not see is audited.
func (s *Server) loadReplay(w http.ResponseWriter, r *http.Request, write bool) (*quarantine.ReplayBatch, bool) {
	id := chi.URLParam(r, "id")
	if !quarantine.ValidID(id) {
		s.fail(w, r, errNoReplay)
		return nil, false
	}
	b, err := s.cfg.Store.GetReplay(r.Context(), id)
	switch {
	case quarantine.ErrorCode(err) == quarantine.ENOTFOUND:
		s.fail(w, r, errNoReplay)
	case err != nil:
		s.fail(w, r, err)
	case !rules.SeesReplay(tokenFrom(r.Context()), b):
		if write {
			s.denyHiddenReplay(w, r, id)
		} else {
			s.fail(w, r, errNoReplay)
		}
	default:
		return b, true
	}
	return nil, false
}

// denyHiddenReplay answers a write on a batch the token may not see with
// the 404 of one that does not exist, and records the attempt as
// access.denied.
func (s *Server) denyHiddenReplay(w http.ResponseWriter, r *http.Request, id string) {
	ev := quarantine.NewAuditEvent(tokenFrom(r.Context()).Actor(), quarantine.ActionAccessDenied, id, map[string]any{
		"method": quarantine.Clip(r.Method), "path": rules.ClipPath(r.URL.Path), "reason": "the replay is outside the token's owners"})
	if _, err := s.cfg.Store.AppendAudit(r.Context(), ev); err != nil {
		s.fail(w, r, err)
		return
	}
	s.fail(w, r, errNoReplay)
}

// replayPage is the body of GET /api/v1/replays.
type replayPage struct {
	Items      []rules.ReplayView `json:"items"`
	NextCursor *string            `json:"next_cursor"`
}

// replayFilter reads the query of GET /api/v1/replays into a filter
// within the token's owners. Errors: EINVALID naming the parameter.
func replayFilter(r *http.Request) (quarantine.ReplayFilter, error) {
	f := quarantine.ReplayFilter{Owners: rules.TokenOwners(tokenFrom(r.Context()))}
	q, err := parseQuery(r, "state", "queue", "actor", "cursor", "limit")
	if err != nil {
		return f, err
	}
	if len(q.all("state")) > len(quarantine.ReplayStates) {
		return f, quarantine.FieldErrorf(quarantine.EINVALID, "state", "at most %d values", len(quarantine.ReplayStates))
	}
	for _, st := range q.all("state") {
		f.State = append(f.State, quarantine.ReplayState(st))
	}
	for _, p := range []struct {
		name string
		dst  *string
	}{{"queue", &f.Queue}, {"actor", &f.Actor}, {"cursor", &f.After}} {
		if *p.dst, err = q.one(p.name); err != nil {
			return f, err
		}
	}
	if f.Limit, err = q.limit(); err != nil {
		return f, err
	}
	return f, f.Validate()
}

// listReplays lists batches, newest first, within the token's owners.
func (s *Server) listReplays(w http.ResponseWriter, r *http.Request) {
	f, err := replayFilter(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	batches, next, err := s.cfg.Store.ListReplays(r.Context(), f)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	now := s.cfg.Now()
	page := replayPage{Items: make([]rules.ReplayView, 0, len(batches))}
	for _, b := range batches {
		v := rules.NewReplayView(b, now)
		// The achieved rate as GET /api/v1/replays/{id} answers it:
		// pauses, halts and the canary's observation excluded (read from
		// the batch's state changes; nothing to read before it starts).
		if v.AchievedRate, err = rules.ReplayRate(r.Context(), s.cfg.Store, b, now); err != nil {
			s.fail(w, r, err)
			return
		}
		page.Items = append(page.Items, v)
	}
	if next != "" {
		page.NextCursor = &next
	}
	s.writeJSON(w, r, http.StatusOK, page)
}

// readReplay loads the batch of a read that takes no query parameters:
// any is refused (EINVALID) before the batch is looked up.
func (s *Server) readReplay(w http.ResponseWriter, r *http.Request) (*quarantine.ReplayBatch, bool) {
	if _, err := parseQuery(r); err != nil {
		s.fail(w, r, err)
		return nil, false
	}
	return s.loadReplay(w, r, false)
}

// getReplay answers one batch.
func (s *Server) getReplay(w http.ResponseWriter, r *http.Request) {
	b, ok := s.readReplay(w, r)
	if !ok {
		return
	}
	v := rules.NewReplayView(b, s.cfg.Now())
	rate, err := rules.ReplayRate(r.Context(), s.cfg.Store, b, s.cfg.Now())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	v.AchievedRate = rate
	s.writeJSON(w, r, http.StatusOK, v)
}

// replayItemPage is the body of GET /api/v1/replays/{id}/items.
type replayItemPage struct {
	Items      []quarantine.ReplayItem `json:"items"`
	NextCursor *string                 `json:"next_cursor"`
}

// replayItemFilter reads the query of GET /api/v1/replays/{id}/items
// into a filter (without its batch). Errors: EINVALID naming the
// parameter.
func replayItemFilter(r *http.Request) (quarantine.ReplayItemFilter, error) {
	f := quarantine.ReplayItemFilter{After: -1}
	q, err := parseQuery(r, "outcome", "cursor", "limit")
	if err != nil {
		return f, err
	}
	if len(q.all("outcome")) > len(quarantine.ItemOutcomes) {
		return f, quarantine.FieldErrorf(quarantine.EINVALID, "outcome", "at most %d values", len(quarantine.ItemOutcomes))
	}
	for _, o := range q.all("outcome") {
		f.Outcome = append(f.Outcome, quarantine.ItemOutcome(o))
	}
	c, err := q.one("cursor")
	if err != nil {
		return f, err
	}
	if c != "" {
		if f.After, err = decodeItemCursor(c); err != nil {
			return f, err
		}
	}
	if f.Limit, err = q.limit(); err != nil {
		return f, err
	}
	return f, f.Validate()
}

// listReplayItems pages through a batch's items in publication order.
func (s *Server) listReplayItems(w http.ResponseWriter, r *http.Request) {
	f, err := replayItemFilter(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	b, ok := s.loadReplay(w, r, false)
	if !ok {
		return
	}
	f.BatchID = b.ID
	items, more, err := s.cfg.Store.ListReplayItems(r.Context(), f)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	items = rules.NonNilItems(items)
	s.writeJSON(w, r, http.StatusOK, replayItemPage{Items: items, NextCursor: nextItemCursor(items, more)})
}

// itemCursorPrefix starts the (decoded) cursor of an item page.
const itemCursorPrefix = "seq:"

// nextItemCursor returns the cursor after the last of items when more
// follow, else nil.
func nextItemCursor(items []quarantine.ReplayItem, more bool) *string {
	if !more || len(items) == 0 {
		return nil
	}
	c := base64.RawURLEncoding.EncodeToString([]byte(itemCursorPrefix + strconv.Itoa(items[len(items)-1].Seq)))
	return &c
}

// decodeItemCursor parses a cursor made by nextItemCursor.
func decodeItemCursor(s string) (int, error) {
	bad := quarantine.FieldErrorf(quarantine.EINVALID, "cursor", "cursor is not one this server issued")
	if len(s) > 64 {
		return 0, bad
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return 0, bad
	}
	digits, ok := strings.CutPrefix(string(b), itemCursorPrefix)
	if !ok {
		return 0, bad
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n < 0 || strconv.Itoa(n) != digits {
		return 0, bad
	}
	return n, nil
}

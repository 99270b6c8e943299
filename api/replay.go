package api

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/rules"
	"github.com/quarantine-dev/quarantine/store"
)

// replayPreviewItems is how many items a dry run answers with; the rest
// are paged through GET /api/v1/replays/{id}/items.
const replayPreviewItems = 50

// replayBody is the body of POST /api/v1/replays. Absent optional
// members take the configured defaults (Config.Replay).
type replayBody struct {
	IDs                 []string        `json:"ids"`
	Filter              json.RawMessage `json:"filter"`
	ExpectCount         *int            `json:"expect_count"`
	Destination         json.RawMessage `json:"destination"`
	Rate                *float64        `json:"rate"`
	Burst               *int            `json:"burst"`
	Canary              *int            `json:"canary"`
	Observe             *string         `json:"observe"`
	HaltRefailRatio     *float64        `json:"halt_refail_ratio"`
	Reason              string          `json:"reason"`
	DryRun              bool            `json:"dry_run"`
	ForceWithoutKey     bool            `json:"force_without_key"`
	Force               bool            `json:"force"`
	AcceptKeyRuleChange bool            `json:"accept_key_rule_change"`
	StartAt             *string         `json:"start_at"`
}

// replayDestinationBody is the "destination" member of a replay body.
type replayDestinationBody struct {
	Queue     string `json:"queue"`
	Collector string `json:"collector"`
}

// replayCreated is the answer to POST /api/v1/replays.
type replayCreated struct {
	Replay           rules.ReplayView `json:"replay"`
	EstimatedSeconds float64          `json:"estimated_seconds"`
}

// replayPreview is the answer to a dry run: also the first page of the
// draft's items (NextCursor nil on the last page).
type replayPreview struct {
	replayCreated
	Items      []quarantine.ReplayItem `json:"items"`
	NextCursor *string                 `json:"next_cursor"`
	// Undeliverable names the items that would not be published (see
	// Undeliverable).
	Undeliverable quarantine.Undeliverable `json:"undeliverable"`
}

// createReplay pins the messages named by ids, or matching a filter,
// within the token's owners, as a new batch: a draft with dry_run, else
// started at once. The checks, in order: the body (400, 413), the
// request's rules (422 for the reason, a rate above the maximum, an
// unknown collector; 400 for malformed values), the destination (403
// naming /destination, recorded as access.denied, for a destination
// queue outside the token's owners: see DestinationAllowed), then the
// store (409 when
// expect_count does not hold; 422 naming /expect_count without it above
// bulk.confirm_above, not a dry run). A selection larger than one chunk
// answers 202 at once with the batch pinning (store.PinAsync). Ids of
// other owners' messages are skipped as not found, and the attempt is
// recorded as access.denied, as a bulk discard does.
func (s *Server) createReplay(w http.ResponseWriter, r *http.Request) {
	var b replayBody
	if err := s.decodeBody(w, r, &b); err != nil {
		s.fail(w, r, err)
		return
	}
	t := tokenFrom(r.Context())
	req, err := s.replayRequest(&b, t)
	if quarantine.ErrorCode(err) == quarantine.EFORBIDDEN {
		s.denyDestination(w, r, req.Destination, err)
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if len(req.IDs) > 0 && len(t.Owners) > 0 {
		_, foreign, err := s.ownIDs(r, t, req.IDs)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if len(foreign) > 0 {
			ev := quarantine.NewAuditEvent(t.Actor(), quarantine.ActionAccessDenied, rules.ClipPath(r.URL.Path), map[string]any{
				"method": quarantine.Clip(r.Method), "path": rules.ClipPath(r.URL.Path), "ids": foreign,
				"reason": "the messages are outside the token's owners"})
			if _, err := s.cfg.Store.AppendAudit(r.Context(), ev); err != nil {
				s.fail(w, r, err)
				return
			}
		}
	}
	batch, pinning, err := store.PinAsync(r.Context(), s.cfg.Store, req, s.cfg.Replay.KeyRule)
	if err != nil {
		s.fail(w, r, rules.ReplayField(err, ""))
		return
	}
	out := replayCreated{Replay: rules.NewReplayView(batch, s.cfg.Now()), EstimatedSeconds: rules.EstimateSeconds(batch)}
	w.Header().Set("Location", "/api/v1/replays/"+batch.ID)
	if pinning {
		// A large selection: pinned in the background; GET shows how far.
		s.writeJSON(w, r, http.StatusAccepted, out)
		return
	}
	if !req.DryRun {
		s.writeJSON(w, r, http.StatusCreated, out)
		return
	}
	items, more, err := s.cfg.Store.ListReplayItems(r.Context(),
		quarantine.ReplayItemFilter{BatchID: batch.ID, After: -1, Limit: replayPreviewItems})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	items = rules.NonNilItems(items)
	und, err := rules.Undeliverable(r.Context(), s.cfg.Store, s.cfg.Replay.Route, batch)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusCreated, replayPreview{replayCreated: out, Items: items, NextCursor: nextItemCursor(items, more), Undeliverable: und})
}

// denyDestination records a refused destination as access.denied and
// answers err (EFORBIDDEN naming /destination). No 403 goes out
// unrecorded: if the audit log cannot be written, the store's error is
// the answer.
func (s *Server) denyDestination(w http.ResponseWriter, r *http.Request, dst quarantine.ReplayDestination, err error) {
	d := s.cfg.Replay.DestinationDenied(dst)
	d["method"], d["path"] = quarantine.Clip(r.Method), rules.ClipPath(r.URL.Path)
	ev := quarantine.NewAuditEvent(tokenFrom(r.Context()).Actor(), quarantine.ActionAccessDenied, rules.ClipPath(r.URL.Path), d)
	if _, aerr := s.cfg.Store.AppendAudit(r.Context(), ev); aerr != nil {
		s.fail(w, r, aerr)
		return
	}
	s.fail(w, r, err)
}

// replayRequest reads a replay body and builds the store's request with
// rules.ReplayDefaults.Request.
func (s *Server) replayRequest(b *replayBody, t *quarantine.Token) (quarantine.ReplayRequest, error) {
	hasFilter := len(b.Filter) > 0 && string(b.Filter) != "null"
	if b.IDs == nil && !hasFilter {
		return quarantine.ReplayRequest{}, quarantine.FieldErrorf(quarantine.EINVALID, "/ids", "give either ids or a filter")
	}
	if b.IDs != nil && len(b.IDs) == 0 {
		return quarantine.ReplayRequest{}, quarantine.FieldErrorf(quarantine.EINVALID, "/ids", "give at least one id")
	}
	ids, f, err := s.selection(b.IDs, b.Filter, b.ExpectCount)
	if err != nil {
		return quarantine.ReplayRequest{}, err
	}
	in := rules.ReplayInput{IDs: ids, Filter: f, ExpectCount: b.ExpectCount, Rate: b.Rate, Burst: b.Burst, Canary: b.Canary,
		HaltRefailRatio: b.HaltRefailRatio, Reason: b.Reason, DryRun: b.DryRun, ForceWithoutKey: b.ForceWithoutKey,
		Force: b.Force, AcceptKeyRuleChange: b.AcceptKeyRuleChange}
	if len(b.Destination) > 0 && string(b.Destination) != "null" {
		var dst replayDestinationBody
		if err := decodeObject(b.Destination, &dst, "/destination"); err != nil {
			return quarantine.ReplayRequest{}, err
		}
		in.Destination = quarantine.ReplayDestination{Queue: dst.Queue, Collector: dst.Collector}
	}
	if b.StartAt != nil {
		at, err := time.Parse(time.RFC3339, *b.StartAt)
		if err != nil {
			return quarantine.ReplayRequest{}, quarantine.FieldErrorf(quarantine.EINVALID, "/start_at",
				"start_at must be an RFC 3339 time like 2026-12-03T02:00:00Z, not %q", quarantine.Clip(*b.StartAt))
		}
		in.StartAt = &at
	}
	if b.Observe != nil {
		o, err := time.ParseDuration(*b.Observe)
		if err != nil {
			return quarantine.ReplayRequest{}, quarantine.FieldErrorf(quarantine.EINVALID, "/observe",
				"observe must be a duration like 30s, 5m or 1h, not %q", quarantine.Clip(*b.Observe))
		}
		in.Observe = &o
	}
	return s.cfg.Replay.Request(in, t)
}

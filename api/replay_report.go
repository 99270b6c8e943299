package api

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// replayReportBatch is the first line of a replay report.
type replayReportBatch struct {
	Type            string                         `json:"type"` // "batch"
	ID              string                         `json:"id"`
	State           quarantine.ReplayState         `json:"state"`
	StateReason     string                         `json:"state_reason"`
	Reason          string                         `json:"reason"`
	Actor           string                         `json:"actor"`
	Destination     quarantine.ReplayDestination   `json:"destination"`
	Rate            float64                        `json:"rate"`
	Canary          int                            `json:"canary"`
	CanaryVerdict   string                         `json:"canary_verdict"`
	Queues          []string                       `json:"queues"`
	Owners          []string                       `json:"owners"`
	Total           int                            `json:"total"`
	Counts          map[quarantine.ItemOutcome]int `json:"counts"`
	CreatedAt       string                         `json:"created_at"`
	StartedAt       *string                        `json:"started_at"`
	FinishedAt      *string                        `json:"finished_at"`
	DurationSeconds *float64                       `json:"duration_seconds"` // from start to finish, or to now
	AchievedRate    *float64                       `json:"achieved_rate"`
}

// replayReportItem is every other line of a replay report.
type replayReportItem struct {
	Type string `json:"type"` // "item"
	quarantine.ReplayItem
}

// replayReport streams a batch as JSON Lines (application/x-ndjson): its
// summary, then each item in publication order, one page of items at a
// time. As for the audit export, an error after the first line aborts
// the connection, so that a cut report never looks complete.
func (s *Server) replayReport(w http.ResponseWriter, r *http.Request) {
	if _, err := parseQuery(r); err != nil {
		s.fail(w, r, err)
		return
	}
	b, ok := s.loadReplay(w, r, false)
	if !ok {
		return
	}
	f := quarantine.ReplayItemFilter{BatchID: b.ID, After: -1, Limit: quarantine.MaxLimit}
	items, more, err := s.cfg.Store.ListReplayItems(r.Context(), f)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	now := s.cfg.Now()
	v := newReplayJSON(b, now)
	head := replayReportBatch{Type: "batch", ID: v.ID, State: v.State, StateReason: v.StateReason, Reason: v.Reason,
		Actor: v.Actor, Destination: v.Destination, Rate: v.Rate, Canary: v.Canary, CanaryVerdict: v.CanaryVerdict,
		Queues: v.Queues, Owners: v.Owners, Total: v.Total, Counts: v.Counts, CreatedAt: timeString(v.CreatedAt),
		AchievedRate: v.AchievedRate}
	if v.StartedAt != nil {
		st := timeString(*v.StartedAt)
		head.StartedAt = &st
		end := now
		if v.FinishedAt != nil {
			end = *v.FinishedAt
			ft := timeString(end)
			head.FinishedAt = &ft
		}
		d := roundSeconds(end.Sub(*v.StartedAt).Seconds())
		head.DurationSeconds = &d
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Disposition", `attachment; filename="replay-`+b.ID+`.jsonl"`)
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	enc := json.NewEncoder(w)
	if err := enc.Encode(head); err != nil {
		return // the client went away
	}
	for {
		for _, it := range nonNilItems(items) {
			if err := enc.Encode(replayReportItem{Type: "item", ReplayItem: it}); err != nil {
				return
			}
		}
		if !more || len(items) == 0 {
			return
		}
		_ = rc.Flush()
		f.After = items[len(items)-1].Seq
		if items, more, err = s.cfg.Store.ListReplayItems(r.Context(), f); err != nil {
			s.log.ErrorContext(r.Context(), "replay report cut short", "request_id", requestIDFrom(r.Context()),
				"replay", b.ID, "after_seq", f.After, "err", err)
			panic(http.ErrAbortHandler)
		}
	}
}

// timeString formats t as JSON does, in UTC.
func timeString(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

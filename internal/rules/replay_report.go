package rules

import (
	"context"
	"encoding/json"
	"fmt"
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

// WriteReplayReport writes the report of batch b as of now to w: the
// headers (JSON Lines, an attachment named replay-ID.jsonl, no-store), the
// batch's summary line, then one line per item in publication order. An
// error of the store before anything was written is returned with started
// false (answer it); after that with started true: the caller must abort
// the connection, so that a cut report never looks complete. A client
// that went away is no error.
func WriteReplayReport(ctx context.Context, w http.ResponseWriter, st ReplayItemLister, b *quarantine.ReplayBatch, now time.Time) (started bool, err error) {
	f := quarantine.ReplayItemFilter{BatchID: b.ID, After: -1, Limit: quarantine.MaxLimit}
	items, more, err := st.ListReplayItems(ctx, f)
	if err != nil {
		return false, err
	}
	v := NewReplayView(b, now)
	// The achieved rate as GET /api/v1/replays/{id} answers it: pauses,
	// halts and the canary's observation excluded.
	if v.AchievedRate, err = ReplayRate(ctx, st, b, now); err != nil {
		return false, err
	}
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
	enc, rc := StartJSONLines(w, "replay-"+b.ID+".jsonl")
	if err := enc.Encode(head); err != nil {
		return true, nil // the client went away
	}
	for {
		for _, it := range NonNilItems(items) {
			if err := enc.Encode(replayReportItem{Type: "item", ReplayItem: it}); err != nil {
				return true, nil
			}
		}
		if !more || len(items) == 0 {
			return true, nil
		}
		_ = rc.Flush()
		f.After = items[len(items)-1].Seq
		if items, more, err = st.ListReplayItems(ctx, f); err != nil {
			return true, fmt.Errorf("after item %d: %w", f.After, err)
		}
	}
}

// StartJSONLines answers 200 with a JSON Lines download named filename
// (application/x-ndjson, not cached) and returns its encoder and the
// controller that flushes each page.
func StartJSONLines(w http.ResponseWriter, filename string) (*json.Encoder, *http.ResponseController) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Disposition", `attachment; filename="`+filename+`"`)
	w.WriteHeader(http.StatusOK)
	return json.NewEncoder(w), http.NewResponseController(w)
}

// ReplayItemLister is what WriteReplayReport reads (a store.Store).
type ReplayItemLister interface {
	ListReplayItems(ctx context.Context, f quarantine.ReplayItemFilter) ([]quarantine.ReplayItem, bool, error)
	AuditLister // the batch's state changes, for its achieved rate
}

// timeString formats t as JSON does, in UTC.
func timeString(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

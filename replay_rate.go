package quarantine

import (
	"encoding/json"
	"slices"
	"time"
)

// AchievedRate is a batch's published (and deduplicated) messages per
// second while it was publishing: the time it spent running, from its
// start until it finished (or now), less the time its canary was being
// observed and the time it was paused or halted (read from changes, the
// batch's state-change audit events in any order; nil changes: no pause
// is known). The interval is at least published / b.Rate, so a batch that
// published one message in a few milliseconds shows its configured rate,
// not a burst. Nil before the batch starts.
func AchievedRate(b *ReplayBatch, changes []AuditEvent, now time.Time) *float64 {
	if b.StartedAt == nil {
		return nil
	}
	end := now
	if b.FinishedAt != nil {
		end = *b.FinishedAt
	}
	active := runningTime(*b.StartedAt, end, changes)
	if b.Canary > 0 && b.Observe > 0 {
		switch b.CanaryVerdict {
		case CanaryPassed:
			active -= b.Observe
		case CanaryObserving:
			if b.CanaryUntil != nil {
				since := b.CanaryUntil.Add(-b.Observe)
				active -= min(max(end.Sub(since), 0), b.Observe)
			}
		}
	}
	n := float64(b.Counts[ItemPublished] + b.Counts[ItemDeduplicated])
	secs := active.Seconds()
	if b.Rate > 0 {
		secs = max(secs, n/b.Rate)
	}
	rate := 0.0
	if secs > 0 {
		rate = float64(int64(n/secs*1000+0.5)) / 1000
	}
	return &rate
}

// runningTime is the time between start and end that the batch spent in
// state running, by the from/to of its state changes (replay.pause,
// replay.halt, replay.resume, …) after start.
func runningTime(start, end time.Time, changes []AuditEvent) time.Duration {
	type change struct {
		at      time.Time
		running bool
	}
	var cs []change
	for _, ev := range changes {
		var d struct {
			From ReplayState `json:"from"`
			To   ReplayState `json:"to"`
		}
		if ev.Time.Before(start) || ev.Time.After(end) || json.Unmarshal(ev.Details, &d) != nil || d.To == "" || d.From == d.To {
			continue
		}
		cs = append(cs, change{ev.Time, d.To == ReplayRunning})
	}
	slices.SortStableFunc(cs, func(a, b change) int { return a.at.Compare(b.at) })
	var total time.Duration
	running, since := true, start
	for _, c := range cs {
		switch {
		case running && !c.running:
			total += c.at.Sub(since)
			running = false
		case !running && c.running:
			running, since = true, c.at
		}
	}
	if running {
		total += end.Sub(since)
	}
	return max(total, 0)
}

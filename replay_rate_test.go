package quarantine_test

import (
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
)

func TestAchievedRate(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	ptr := func(v time.Time) *time.Time { return &v }
	change := func(s float64, from, to quarantine.ReplayState) quarantine.AuditEvent {
		ev := quarantine.NewAuditEvent("token:op", quarantine.ActionReplayPause, "b", map[string]any{"reason": "r", "from": from, "to": to})
		ev.Time = at(s)
		return ev
	}
	batch := func(published int, finished float64, mod func(b *quarantine.ReplayBatch)) *quarantine.ReplayBatch {
		b := &quarantine.ReplayBatch{Rate: 10, StartedAt: ptr(t0), Counts: map[quarantine.ItemOutcome]int{quarantine.ItemPublished: published}}
		if finished > 0 {
			b.FinishedAt = ptr(at(finished))
		}
		if mod != nil {
			mod(b)
		}
		return b
	}
	cases := []struct {
		name    string
		b       *quarantine.ReplayBatch
		changes []quarantine.AuditEvent
		now     float64
		want    float64
	}{
		{"one message in 24 ms at 10 msg/s shows 10, not 41.5", batch(1, 0.024, nil), nil, 99, 10},
		{"steady", batch(100, 10, nil), nil, 99, 10},
		{"slow destination", batch(10, 4, nil), nil, 99, 2.5},
		{"the canary's observation is not publishing time", batch(50, 35, func(b *quarantine.ReplayBatch) {
			b.Canary, b.Observe, b.CanaryVerdict = 5, 30*time.Second, quarantine.CanaryPassed
		}), nil, 99, 10},
		{"while the canary is observed", batch(5, 0, func(b *quarantine.ReplayBatch) {
			b.Canary, b.Observe, b.CanaryVerdict, b.CanaryUntil = 5, 30*time.Second, quarantine.CanaryObserving, ptr(at(35))
		}), nil, 12, 1},
		{"pauses are not publishing time", batch(30, 63, nil), []quarantine.AuditEvent{
			change(61, quarantine.ReplayPaused, quarantine.ReplayRunning), change(1, quarantine.ReplayRunning, quarantine.ReplayPaused),
		}, 99, 10},
		{"paused now", batch(10, 0, nil), []quarantine.AuditEvent{change(2, quarantine.ReplayRunning, quarantine.ReplayPaused)}, 600, 5},
		{"deduplicated count as published", batch(5, 1, func(b *quarantine.ReplayBatch) { b.Counts[quarantine.ItemDeduplicated] = 5 }), nil, 99, 10},
		{"nothing published yet", batch(0, 0, nil), nil, 3, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := quarantine.AchievedRate(tc.b, tc.changes, at(tc.now))
			if got == nil || *got != tc.want {
				t.Fatalf("AchievedRate = %v, want %v", deref(got), tc.want)
			}
		})
	}
	if quarantine.AchievedRate(&quarantine.ReplayBatch{Rate: 10}, nil, t0) != nil {
		t.Fatal("a batch not started has no rate")
	}
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

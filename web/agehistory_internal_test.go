package web

import (
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// The sparklines' edges are 24 buckets of clock hours ending at the end
// of now's minute, the last one so far this hour; on the hour, or in its
// last minute, 24 whole hours.
func TestHourlyEdges(t *testing.T) {
	t.Parallel()
	mid := time.Date(2026, 3, 2, 12, 34, 56, 0, time.UTC)
	e := hourlyEdges(mid)
	if len(e) != 25 || !e[0].Equal(time.Date(2026, 3, 1, 13, 0, 0, 0, time.UTC)) || !e[23].Equal(mid.Truncate(time.Hour)) ||
		!e[24].Equal(time.Date(2026, 3, 2, 12, 35, 0, 0, time.UTC)) {
		t.Fatalf("edges at %v: %v", mid, e)
	}
	if last := hourlyEdges(time.Date(2026, 3, 2, 12, 59, 1, 0, time.UTC)); len(last) != 25 || !last[24].Equal(time.Date(2026, 3, 2, 13, 0, 0, 0, time.UTC)) {
		t.Fatalf("edges in the hour's last minute: %v", last)
	}
	on := mid.Truncate(time.Hour)
	e = hourlyEdges(on)
	if len(e) != 25 || !e[0].Equal(on.Add(-24*time.Hour)) || !e[24].Equal(on) {
		t.Fatalf("edges at %v: %v", on, e)
	}
	for i := 1; i < len(e); i++ {
		if e[i].Sub(e[i-1]) != time.Hour {
			t.Fatalf("edges at %v are not whole hours: %v", on, e)
		}
	}
}

// The age history is the 96 steps up to now, the last one holding the
// time just before now.
func TestHistoryRequest(t *testing.T) {
	t.Parallel()
	for _, now := range []time.Time{time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC), time.Date(2026, 3, 2, 12, 7, 30, 0, time.UTC)} {
		r := historyRequest(now, nil)
		steps := r.Steps()
		if len(steps) != historySteps || !steps[len(steps)-1].Before(now) || now.Sub(steps[len(steps)-1]) > quarantine.AgeHistoryStep {
			t.Fatalf("at %v: %d steps, the last at %v", now, len(steps), steps[len(steps)-1])
		}
	}
}

func TestSpanAndNiceTop(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{0: "0", 45 * time.Second: "45 s", 12 * time.Minute: "12 min",
		3*time.Hour + 20*time.Minute: "3 h 20 min", 3 * time.Hour: "3 h", 47 * time.Hour: "47 h",
		4*24*time.Hour + 6*time.Hour: "4 d 6 h", 30 * 24 * time.Hour: "30 d"} {
		if got := span(d); got != want {
			t.Errorf("span(%v) = %q, want %q", d, got, want)
		}
	}
	for d, want := range map[time.Duration]time.Duration{0: 10 * time.Minute, 11 * time.Minute: 30 * time.Minute,
		5 * time.Hour: 8 * time.Hour, 40 * 24 * time.Hour: 40 * 24 * time.Hour, 40*24*time.Hour + time.Minute: 41 * 24 * time.Hour} {
		if got := niceTop(d); got != want {
			t.Errorf("niceTop(%v) = %v, want %v", d, got, want)
		}
	}
}

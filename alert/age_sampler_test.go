package alert_test

import (
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/alert"
)

// The sampler writes one sample a minute and prunes what is older than
// Keep once an hour, on its clock.
func TestAgeSamplerSamplesAndPrunes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := newClock()
	s := openSQLite(t, c)
	deadLetter(t, s, c, "orders", time.Hour)
	now := c.Now().Add(30 * time.Second)
	clock := now
	a := alert.NewAgeSampler(alert.AgeSamplerConfig{Store: s, Keep: 2 * time.Hour, Now: func() time.Time { return clock }})
	step := func(wantTaken bool) {
		t.Helper()
		res, err := a.Step(ctx)
		if err != nil || res.Taken != wantTaken || wantTaken && res.Queues != 1 {
			t.Fatalf("Step at %v = %+v, %v; want taken %v", clock, res, err, wantTaken)
		}
	}
	step(true)
	clock = now.Add(20 * time.Second) // the same minute
	step(false)
	for i := 1; i <= 180; i++ { // three hours, a sample a minute
		clock = now.Add(time.Duration(i) * time.Minute)
		step(true)
	}
	if a.Steps() != 182 {
		t.Fatalf("Steps = %d, want 182", a.Steps())
	}
	h, err := s.AgeHistory(ctx, quarantine.AgeHistoryRequest{From: now.Add(-time.Hour), To: clock})
	if err != nil {
		t.Fatal(err)
	}
	// Pruned once an hour (at the first step, then at +60, +120 and +180
	// minutes): the last prune, at +180, deleted the steps before the
	// one holding +60; every minute since is there, 15 a step.
	keep := clock.Add(-2 * time.Hour).Truncate(quarantine.AgeHistoryStep)
	var kept, older int64
	for i, st := range h.Steps {
		switch {
		case st.Before(keep):
			older += h.Samples[i]
		case st.Add(quarantine.AgeHistoryStep).Before(clock):
			if h.Samples[i] != 15 {
				t.Fatalf("step %v has %d samples, want one a minute", st, h.Samples[i])
			}
			kept += h.Samples[i]
		}
	}
	if older != 0 || kept == 0 {
		t.Fatalf("samples %v: want none before %v", h.Samples, keep)
	}
	last := len(h.Steps) - 1
	if len(h.Queues) != 1 || h.Queues[0].Oldest[last] != 4*time.Hour+30*time.Second {
		t.Fatalf("history %+v: want orders' oldest at 4 h 30 s", h.Queues)
	}
}

package quarantine_test

import (
	"testing"

	"github.com/quarantine-dev/quarantine"
)

// TestReplayRequestDefaultBurst: the default burst is a tenth of the
// rate, at least 1 and never above the bound an explicit burst has, even
// with no configured maximum rate.
func TestReplayRequestDefaultBurst(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		rate float64
		want int
	}{{0.5, 1}, {10, 1}, {250, 25}, {1e5, quarantine.MaxBulk}, {1e300, quarantine.MaxBulk}} {
		r := quarantine.ReplayRequest{IDs: []string{"01JTEST"}, Reason: "incident", Actor: "token:op", Rate: c.rate}
		if err := r.Validate(0); err != nil {
			t.Fatalf("rate %g: %v", c.rate, err)
		}
		if r.Burst != c.want {
			t.Errorf("rate %g: default burst %d, want %d", c.rate, r.Burst, c.want)
		}
	}
}

package backoff

import (
	"testing"
	"time"
)

func TestCeiling(t *testing.T) {
	for _, c := range []struct {
		n           int
		init, limit time.Duration
		mult        float64
		want        time.Duration
	}{
		{1, time.Second, time.Minute, 2, time.Second},
		{0, time.Second, time.Minute, 2, time.Second},
		{3, time.Second, time.Minute, 2, 4 * time.Second},
		{10, time.Second, time.Minute, 2, time.Minute},
		{200, time.Second, 0, 2, maxDuration},
		{5, 0, time.Minute, 2, 0},
		{3, 100 * time.Millisecond, time.Minute, 1.5, 225 * time.Millisecond},
	} {
		if got := Ceiling(c.n, c.init, c.mult, c.limit); got != c.want {
			t.Errorf("Ceiling(%d, %s, %g, %s) = %s, want %s", c.n, c.init, c.mult, c.limit, got, c.want)
		}
	}
}

func TestJitterBounds(t *testing.T) {
	for range 1000 {
		if d := Full(3, time.Second, 2, time.Minute); d < 0 || d > 4*time.Second {
			t.Fatalf("Full out of [0, 4s]: %s", d)
		}
		if d := Equal(3, time.Second, 2, time.Minute); d < 2*time.Second || d > 4*time.Second {
			t.Fatalf("Equal out of [2s, 4s]: %s", d)
		}
	}
	if Full(1, 0, 2, time.Minute) != 0 || Equal(1, 0, 2, time.Minute) != 0 {
		t.Fatal("a zero initial waits")
	}
}

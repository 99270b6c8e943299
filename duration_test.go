package quarantine

import (
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	t.Parallel()
	const day = 24 * time.Hour
	for s, want := range map[string]time.Duration{
		"90s": 90 * time.Second, " 15m ": 15 * time.Minute, "2h30m": 150 * time.Minute,
		"7d": 7 * day, "0d": 0, "1d12h": day + 12*time.Hour, "30d": 30 * day, "0": 0, "-5m": -5 * time.Minute,
	} {
		if got, err := ParseDuration(s); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %s, %v; want %s", s, got, err, want)
		}
	}
	for _, s := range []string{"", "d", "7", "-1d", "1.5d", "7days", "1d-2h", "d12h", "100001d", "1dx", "7 d"} {
		if d, err := ParseDuration(s); err == nil {
			t.Errorf("ParseDuration(%q) = %s, want an error", s, d)
		}
	}
}

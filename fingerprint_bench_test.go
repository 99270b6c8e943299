package quarantine_test

import (
	"testing"

	"github.com/quarantine-dev/quarantine"
)

func BenchmarkFingerprint(b *testing.B) {
	reason := `charge 4711 failed for card "tok_abc" id 3f2a9c1e-0b7d-4c1e-9a7b-1d2e3f4a5b6c: upstream timeout after 1500ms (attempt 3 of 5) at 0x7ffd1234`
	for b.Loop() {
		quarantine.Fingerprint("charge", quarantine.ClassExhausted, reason)
	}
}

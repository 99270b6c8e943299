package main

import (
	"os"
	"runtime/debug"
	"testing"
)

// The defaults apply only where the environment says nothing: GOGC and
// GOMEMLIMIT set by an operator win. Not parallel: the settings are the
// process's.
func TestSetGCPercentDefaults(t *testing.T) {
	percent, limit := debug.SetGCPercent(100), debug.SetMemoryLimit(-1)
	t.Cleanup(func() {
		debug.SetGCPercent(percent)
		debug.SetMemoryLimit(limit)
	})
	unsetenv(t, "GOGC")
	unsetenv(t, "GOMEMLIMIT")
	debug.SetMemoryLimit(1 << 40)
	setGCPercent()
	if got := debug.SetGCPercent(100); got != defaultGCPercent {
		t.Errorf("GOGC unset: GC percent %d, want %d", got, defaultGCPercent)
	}
	if got := debug.SetMemoryLimit(-1); got != defaultMemoryLimit {
		t.Errorf("GOMEMLIMIT unset: memory limit %d, want %d", got, defaultMemoryLimit)
	}

	// Set in the environment: the runtime read them at start; serve
	// leaves what it finds.
	t.Setenv("GOGC", "150")
	t.Setenv("GOMEMLIMIT", "1GiB")
	debug.SetGCPercent(150)
	debug.SetMemoryLimit(1 << 30)
	setGCPercent()
	if got := debug.SetGCPercent(100); got != 150 {
		t.Errorf("GOGC=150: GC percent %d, want 150", got)
	}
	if got := debug.SetMemoryLimit(-1); got != 1<<30 {
		t.Errorf("GOMEMLIMIT=1GiB: memory limit %d, want %d", got, 1<<30)
	}
}

// unsetenv unsets key for the test, restoring it after.
func unsetenv(t *testing.T, key string) {
	t.Helper()
	t.Setenv(key, "") // restores the old value at cleanup
	if err := os.Unsetenv(key); err != nil {
		t.Fatal(err)
	}
}

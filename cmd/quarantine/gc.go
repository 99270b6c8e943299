package main

import (
	"os"
	"runtime/debug"
)

// defaultGCPercent is the garbage collector's target (GOGC) when the
// environment does not set GOGC: the heap may grow to five times what is
// live before a collection, instead of twice. A collector's live heap is
// small (the deliveries it holds, a few megabytes) and its garbage is
// most of what it allocates, so collections ran often (the CPU this
// saves is in docs/benchmarks.md, Memory and SQLite tuning). GOGC (and
// GOMEMLIMIT) in the environment still win.
const defaultGCPercent = 400

// defaultMemoryLimit is the Go runtime's soft memory limit (GOMEMLIMIT)
// when the environment does not set GOMEMLIMIT. A replay's workers hold
// chunks of leased messages, tens of MiB live; five times that (GOGC
// 400) would be a third of serve's memory bound (300 MB while replaying
// a million: docs/replays-at-scale.md, Serve's memory). Above this limit
// the heap is collected sooner instead. A collector's heap stays far
// below it. It is a soft limit: a heap that needs more gets it, collected
// more often.
const defaultMemoryLimit = 96 << 20

// setGCPercent applies defaultGCPercent unless GOGC is set, and
// defaultMemoryLimit unless GOMEMLIMIT is set.
func setGCPercent() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(defaultGCPercent)
	}
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		debug.SetMemoryLimit(defaultMemoryLimit)
	}
}

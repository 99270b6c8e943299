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

// setGCPercent applies defaultGCPercent unless GOGC is set.
func setGCPercent() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(defaultGCPercent)
	}
}

//go:build race

package storetest

// raceEnabled says the race detector is on: cases that only repeat a
// sequential path thousands of times skip under it.
const raceEnabled = true

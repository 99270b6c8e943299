//go:build !race

package replay_test

// raceEnabled: the race detector slows every store call several times,
// so that premises about how long a call takes may not hold.
const raceEnabled = false

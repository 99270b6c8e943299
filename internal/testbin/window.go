package testbin

import (
	"slices"
	"time"
)

// MaxInWindow is the most of the times at that fall within any window of
// length w: what a rate limit bounds. at is sorted in place.
func MaxInWindow(at []time.Time, w time.Duration) int {
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	best, j := 0, 0
	for i := range at {
		for at[i].Sub(at[j]) >= w {
			j++
		}
		best = max(best, i-j+1)
	}
	return best
}

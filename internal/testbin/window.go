package testbin

import (
	"slices"
	"sync"
	"testing"
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

// Stalls measures how long this process goes unscheduled: the lateness
// of a ticker. A consumer left waiting that long stamps what arrived
// meanwhile at once, so a rate check of arrival times allows for it.
type Stalls struct {
	mu      sync.Mutex
	longest time.Duration
}

// MeasureStalls ticks every tick until tb ends and keeps the longest
// lateness.
func MeasureStalls(tb testing.TB, tick time.Duration) *Stalls {
	s := &Stalls{}
	stop := make(chan struct{})
	tb.Cleanup(func() { close(stop) })
	go func() {
		t := time.NewTicker(tick)
		defer t.Stop()
		last := time.Now()
		for {
			select {
			case <-stop:
				return
			case now := <-t.C:
				if late := now.Sub(last) - tick; late > 0 {
					s.mu.Lock()
					s.longest = max(s.longest, late)
					s.mu.Unlock()
				}
				last = now
			}
		}
	}()
	return s
}

// Longest is the longest stall measured so far.
func (s *Stalls) Longest() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.longest
}

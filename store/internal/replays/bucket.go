package replays

import (
	"math"
	"slices"
	"strings"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// Buckets validates bs and returns them sorted by key (the order every
// store locks them in), one per key: the first of duplicates wins.
func Buckets(bs []quarantine.RateBucket) ([]quarantine.RateBucket, error) {
	out := make([]quarantine.RateBucket, 0, len(bs))
	for _, b := range bs {
		if b.Key == "" || math.IsNaN(b.Rate) || math.IsInf(b.Rate, 0) || b.Rate <= 0 {
			return nil, quarantine.Errorf(quarantine.EINVALID, "a rate bucket needs a key and a positive rate")
		}
		if !slices.ContainsFunc(out, func(o quarantine.RateBucket) bool { return o.Key == b.Key }) {
			out = append(out, b)
		}
	}
	slices.SortFunc(out, func(a, b quarantine.RateBucket) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// Capacity is the most tokens b holds: its burst, at least 1.
func Capacity(b quarantine.RateBucket) float64 { return float64(max(1, b.Burst)) }

// Refill returns the tokens of b at now, which held tokens at last.
func Refill(b quarantine.RateBucket, tokens float64, last, now time.Time) float64 {
	if el := now.Sub(last).Seconds(); el > 0 {
		tokens += b.Rate * el
	}
	return math.Min(Capacity(b), tokens)
}

// Grant returns how many tokens to take from every bucket, holding
// tokens[i] each (refilled), for want: the same number from each, at most
// the smallest whole number available. When 0, wait is how long until the
// scarcest bucket holds one token.
func Grant(bs []quarantine.RateBucket, tokens []float64, want int) (n int, wait time.Duration) {
	if want <= 0 {
		return 0, 0
	}
	n = want
	for _, t := range tokens {
		n = min(n, int(math.Floor(t+1e-9)))
	}
	if n > 0 {
		return n, 0
	}
	n = 0
	var w float64
	for i, b := range bs {
		if need := 1 - tokens[i]; need > 0 {
			w = math.Max(w, need/b.Rate)
		}
	}
	return 0, max(time.Microsecond, time.Duration(math.Ceil(w*1e6))*time.Microsecond)
}

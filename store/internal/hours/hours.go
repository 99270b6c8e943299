// Package hours plans an inflow histogram over the stores' hourly inflow
// counts (table inflow_hours): the row of hour h counts the messages
// collected in (h, h+1h], UTC hours. A bucket (lo, hi] of the histogram
// is the whole windows between the first hour at or after lo and the last
// at or before hi, read from those counts, and the parts left at its ends
// (each shorter than an hour), counted from the messages' index. Buckets
// on whole hours are read from the counts alone, so that the 24 hourly
// buckets of the overview cost a few rows per queue whatever the inflow,
// while any edges still count exactly.
package hours

import (
	"slices"
	"time"
)

// Range is a part of one bucket: kept hours with Lo <= h < Hi (both
// whole hours), or messages counted with Lo < collected_at <= Hi.
type Range struct {
	Bucket int
	Lo, Hi time.Time
}

// Plan is how a histogram's buckets are read.
type Plan struct {
	// Kept are the whole-hour parts, ascending and disjoint.
	Kept []Range
	// Counted are the parts counted from messages, ascending.
	Counted []Range
}

// Of plans the buckets of edges (ascending; compared at the
// microsecond, like the stores).
func Of(edges []time.Time) Plan {
	var p Plan
	for b := 0; b+1 < len(edges); b++ {
		lo, hi := edges[b].UTC().Truncate(time.Microsecond), edges[b+1].UTC().Truncate(time.Microsecond)
		a := lo.Truncate(time.Hour)
		if a.Before(lo) {
			a = a.Add(time.Hour)
		}
		z := hi.Truncate(time.Hour)
		if !a.Before(z) {
			p.Counted = append(p.Counted, Range{b, lo, hi})
			continue
		}
		if lo.Before(a) {
			p.Counted = append(p.Counted, Range{b, lo, a})
		}
		p.Kept = append(p.Kept, Range{b, a, z})
		if z.Before(hi) {
			p.Counted = append(p.Counted, Range{b, z, hi})
		}
	}
	return p
}

// Span is the hours the kept parts cover, [from, to); ok is false when
// there is no kept part.
func (p Plan) Span() (from, to time.Time, ok bool) {
	if len(p.Kept) == 0 {
		return time.Time{}, time.Time{}, false
	}
	return p.Kept[0].Lo, p.Kept[len(p.Kept)-1].Hi, true
}

// Bucket is the bucket whose kept part holds hour h, or -1 when none does
// (h lies in a part counted from messages, or outside the edges).
func (p Plan) Bucket(h time.Time) int {
	i, _ := slices.BinarySearchFunc(p.Kept, h, func(r Range, t time.Time) int {
		switch {
		case !r.Hi.After(t):
			return -1
		case r.Lo.After(t):
			return 1
		}
		return 0
	})
	if i < len(p.Kept) && !p.Kept[i].Lo.After(h) && h.Before(p.Kept[i].Hi) {
		return p.Kept[i].Bucket
	}
	return -1
}

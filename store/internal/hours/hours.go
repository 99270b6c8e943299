// Package hours plans an inflow histogram over the stores' hourly and
// per-minute inflow counts (tables inflow_hours and inflow_minutes): the
// row of hour h counts the messages collected in (h, h+1h], UTC hours,
// and the row of minute m those in (m, m+1m]. A bucket (lo, hi] of the
// histogram is the whole hours between the first hour at or after lo and
// the last at or before hi, read from the hourly counts; the parts left
// at its ends (each shorter than an hour) are, in the same way, whole
// minutes read from the minute counts (those the stores still keep:
// MinutesKept) and parts shorter than a minute counted from the
// messages' index. Buckets on whole minutes are read from the counts
// alone, so that the overview's sparklines and the queues' 5-minute,
// 1-hour and 24-hour inflow cost a few hundred rows per queue at most
// whatever the inflow, while any edges still count exactly.
package hours

import (
	"slices"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// InflowWindows are the inflow windows of the queue stats (Inflow5m,
// Inflow1h, Inflow24h), before the window end (WindowEnd).
var InflowWindows = [3]time.Duration{5 * time.Minute, time.Hour, 24 * time.Hour}

// InflowBuckets returns the three inflow windows read at now as the
// edges of the buckets (end-24h, end-1h], (end-1h, end-5m] and
// (end-5m, end] of the kept counts, and n histograms of those buckets,
// zero, for a store's inflow histogram of n queues.
func InflowBuckets(now time.Time, n int) ([]time.Time, []quarantine.QueueHistogram) {
	end := WindowEnd(now)
	w := InflowWindows
	edges := []time.Time{end.Add(-w[2]), end.Add(-w[1]), end.Add(-w[0]), end}
	hs := make([]quarantine.QueueHistogram, n)
	for i := range hs {
		hs[i].Counts = make([]int64, 3)
	}
	return edges, hs
}

// SetInflow sets the inflow windows of each of out from the histogram of
// InflowBuckets at the same index.
func SetInflow(out []quarantine.QueueStats, hs []quarantine.QueueHistogram) {
	for i, h := range hs {
		out[i].Inflow5m = h.Counts[2]
		out[i].Inflow1h = h.Counts[1] + h.Counts[2]
		out[i].Inflow24h = h.Counts[0] + h.Counts[1] + h.Counts[2]
	}
}

// MinutesKept is how long the stores keep the minute counts: a row of
// minute m may be deleted once m is this long before the store's clock
// (the age sampler's hourly prune deletes them). A read uses the minute
// counts only from Usable(now), a day before the clock: the hour between
// is the margin for clocks that differ between instances.
const MinutesKept = 25 * time.Hour

// Usable is the first minute whose count a read at the store's clock now
// may use: every minute count from there on is kept.
func Usable(now time.Time) time.Time {
	return now.UTC().Truncate(time.Minute).Add(-24 * time.Hour)
}

// Range is a part of one bucket: kept hours (or minutes) with Lo <= h <
// Hi (both whole hours, or minutes), or messages counted with Lo <
// collected_at <= Hi.
type Range struct {
	Bucket int
	Lo, Hi time.Time
}

// Plan is how a histogram's buckets are read.
type Plan struct {
	// Kept are the whole-hour parts, ascending and disjoint.
	Kept []Range
	// Minutes are the whole-minute parts (of minutes from the usable
	// one on), ascending and disjoint.
	Minutes []Range
	// Counted are the parts counted from messages, ascending.
	Counted []Range
}

// Of plans the buckets of edges (ascending; compared at the
// microsecond, like the stores), reading minute counts from the minute
// usable on (see Usable; the zero time: none).
func Of(edges []time.Time, usable time.Time) Plan {
	var p Plan
	for b := 0; b+1 < len(edges); b++ {
		lo, hi := edges[b].UTC().Truncate(time.Microsecond), edges[b+1].UTC().Truncate(time.Microsecond)
		a, z, ok := whole(lo, hi, time.Hour, time.Time{})
		if !ok {
			p.minutes(b, lo, hi, usable)
			continue
		}
		if lo.Before(a) {
			p.minutes(b, lo, a, usable)
		}
		p.Kept = append(p.Kept, Range{b, a, z})
		if z.Before(hi) {
			p.minutes(b, z, hi, usable)
		}
	}
	return p
}

// OfMinutes plans the buckets of edges over minute counts alone (the
// quarantined messages by failed_at, waiting_minutes, kept for every
// minute): whole minutes, and the parts under a minute at the ends
// counted.
func OfMinutes(edges []time.Time) Plan {
	var p Plan
	for b := 0; b+1 < len(edges); b++ {
		lo, hi := edges[b].UTC().Truncate(time.Microsecond), edges[b+1].UTC().Truncate(time.Microsecond)
		p.minutes(b, lo, hi, time.Date(1, 1, 1, 0, 1, 0, 0, time.UTC)) // every minute: the first one after the zero time
	}
	return p
}

// whole returns the whole units [a, z) inside (lo, hi] from the unit at
// from on, and whether there is any.
func whole(lo, hi time.Time, unit time.Duration, from time.Time) (a, z time.Time, ok bool) {
	a = lo.Truncate(unit)
	if a.Before(lo) {
		a = a.Add(unit)
	}
	if a.Before(from) {
		a = from
	}
	z = hi.Truncate(unit)
	return a, z, a.Before(z)
}

// minutes plans the part (lo, hi] of bucket b, shorter than an hour:
// whole usable minutes, and the rest counted.
func (p *Plan) minutes(b int, lo, hi, usable time.Time) {
	if usable.IsZero() {
		p.Counted = append(p.Counted, Range{b, lo, hi})
		return
	}
	a, z, ok := whole(lo, hi, time.Minute, usable)
	if !ok {
		p.Counted = append(p.Counted, Range{b, lo, hi})
		return
	}
	if lo.Before(a) {
		p.Counted = append(p.Counted, Range{b, lo, a})
	}
	p.Minutes = append(p.Minutes, Range{b, a, z})
	if z.Before(hi) {
		p.Counted = append(p.Counted, Range{b, z, hi})
	}
}

// WindowEnd is the end of the inflow windows read at now: the end of
// the minute holding now (now itself when it is a whole minute), so that
// windows of whole minutes before it are read from the counts alone.
func WindowEnd(now time.Time) time.Time {
	now = now.UTC().Truncate(time.Microsecond)
	end := now.Truncate(time.Minute)
	if end.Before(now) {
		end = end.Add(time.Minute)
	}
	return end
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

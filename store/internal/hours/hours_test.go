package hours

import (
	"math/rand/v2"
	"testing"
	"time"
)

// The plan covers every microsecond of every bucket exactly once: a
// time t in (lo, hi] is either in a counted part or in the window of a
// kept hour of the same bucket, never both; times outside the edges are
// in none.
func TestPlanCoversEachBucketOnce(t *testing.T) {
	t.Parallel()
	base := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(1, 2))
	edgeSets := [][]time.Time{
		{base.Add(-24 * time.Hour), base.Add(-time.Hour), base},
		{base.Add(-90 * time.Minute), base.Add(-30 * time.Minute), base.Add(10 * time.Minute)},
		{base.Add(time.Microsecond), base.Add(time.Hour - time.Microsecond), base.Add(3*time.Hour + 1)},
	}
	for range 20 {
		e := []time.Time{base.Add(-time.Duration(rng.Int64N(int64(48 * time.Hour))))}
		for range 1 + rng.IntN(8) {
			e = append(e, e[len(e)-1].Add(time.Microsecond+time.Duration(rng.Int64N(int64(5*time.Hour)))))
		}
		edgeSets = append(edgeSets, e)
	}
	for k, edges := range edgeSets {
		for i := range edges {
			edges[i] = edges[i].Truncate(time.Microsecond) // the stores' precision
		}
		// Minute counts: none, all, or from a minute among the edges.
		var usable time.Time
		switch k % 3 {
		case 1:
			usable = edges[0].Add(-48 * time.Hour).Truncate(time.Minute)
		case 2:
			usable = edges[0].Add(time.Duration(rng.Int64N(int64(edges[len(edges)-1].Sub(edges[0]) + 1)))).Truncate(time.Minute)
		}
		p := Of(edges, usable)
		if k%4 == 3 {
			p, usable = OfMinutes(edges), time.Time{}
			if len(p.Kept) != 0 {
				t.Fatalf("OfMinutes(%v) keeps hours: %+v", edges, p.Kept)
			}
		}
		for _, r := range p.Minutes {
			if r.Lo.Before(usable) || r.Lo.Truncate(time.Minute) != r.Lo || r.Hi.Truncate(time.Minute) != r.Hi || r.Hi.Sub(r.Lo) >= 2*time.Hour && k%4 != 3 {
				t.Fatalf("minute part %+v: before the usable %v, not whole minutes or two hours long", r, usable)
			}
		}
		probe := func(ts time.Time) {
			want := -1
			for b := 0; b+1 < len(edges); b++ {
				if ts.After(edges[b]) && !ts.After(edges[b+1]) {
					want = b
				}
			}
			got := -1
			n := 0
			for _, r := range p.Counted {
				if ts.After(r.Lo) && !ts.After(r.Hi) {
					got, n = r.Bucket, n+1
				}
			}
			// The kept hour of ts: h < ts <= h+1h.
			h := ts.Add(-time.Microsecond).Truncate(time.Hour)
			if b := p.Bucket(h); b >= 0 {
				got, n = b, n+1
			}
			// Its kept minute: m < ts <= m+1m.
			m := ts.Add(-time.Microsecond).Truncate(time.Minute)
			for _, r := range p.Minutes {
				if !m.Before(r.Lo) && m.Before(r.Hi) {
					got, n = r.Bucket, n+1
				}
			}
			if n > 1 || got != want {
				t.Fatalf("edges %v: %v is in bucket %d (%d parts), want %d; plan %+v", edges, ts, got, n, want, p)
			}
		}
		for _, e := range edges {
			for _, d := range []time.Duration{-time.Hour, -time.Microsecond, 0, time.Microsecond, time.Hour} {
				probe(e.Add(d))
			}
		}
		for range 200 {
			probe(edges[0].Add(time.Duration(rng.Int64N(int64(edges[len(edges)-1].Sub(edges[0])+2*time.Hour))) - time.Hour).Truncate(time.Microsecond))
		}
	}
}

// Whole-hour edges are read from the kept counts alone; the last bucket
// up to a time inside the hour counts only that part.
func TestPlanOfHourlyEdges(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 3, 1, 12, 34, 56, 0, time.UTC)
	top := now.Truncate(time.Hour)
	var edges []time.Time
	for i := 23; i >= 0; i-- {
		edges = append(edges, top.Add(-time.Duration(i)*time.Hour))
	}
	p := Of(edges, Usable(now))
	if len(p.Counted) != 0 || len(p.Kept) != 23 || len(p.Minutes) != 0 {
		t.Fatalf("whole hours: %d counted, %d kept parts, want 0 and 23", len(p.Counted), len(p.Kept))
	}
	p = Of(append(edges, now), time.Time{})
	if len(p.Counted) != 1 || p.Counted[0] != (Range{23, top, now}) {
		t.Fatalf("with now last, no minutes: counted %+v, want only (%v, %v]", p.Counted, top, now)
	}
	// With the minute counts, the current hour is its whole minutes and
	// the seconds of now's minute; up to the window end, minutes alone.
	q := Of(append(edges, now), Usable(now))
	if len(q.Counted) != 1 || q.Counted[0] != (Range{23, now.Truncate(time.Minute), now}) ||
		len(q.Minutes) != 1 || q.Minutes[0] != (Range{23, top, now.Truncate(time.Minute)}) {
		t.Fatalf("with now last: minutes %+v, counted %+v", q.Minutes, q.Counted)
	}
	end := WindowEnd(now)
	q = Of([]time.Time{end.Add(-24 * time.Hour), end.Add(-time.Hour), end.Add(-5 * time.Minute), end}, Usable(now))
	if len(q.Counted) != 0 || len(q.Kept) != 1 || len(q.Minutes) != 4 {
		t.Fatalf("inflow windows: kept %+v, minutes %+v, counted %+v", q.Kept, q.Minutes, q.Counted)
	}
	if from, to, ok := p.Span(); !ok || !from.Equal(top.Add(-23*time.Hour)) || !to.Equal(top) {
		t.Fatalf("Span = %v %v %v", from, to, ok)
	}
}

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
	for _, edges := range edgeSets {
		for i := range edges {
			edges[i] = edges[i].Truncate(time.Microsecond) // the stores' precision
		}
		p := Of(edges)
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
	p := Of(edges)
	if len(p.Counted) != 0 || len(p.Kept) != 23 {
		t.Fatalf("whole hours: %d counted, %d kept parts, want 0 and 23", len(p.Counted), len(p.Kept))
	}
	p = Of(append(edges, now))
	if len(p.Counted) != 1 || p.Counted[0] != (Range{23, top, now}) {
		t.Fatalf("with now last: counted %+v, want only (%v, %v]", p.Counted, top, now)
	}
	if from, to, ok := p.Span(); !ok || !from.Equal(top.Add(-23*time.Hour)) || !to.Equal(top) {
		t.Fatalf("Span = %v %v %v", from, to, ok)
	}
}

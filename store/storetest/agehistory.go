package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// AgeHistory: SampleAges writes one sample per queue and owner with
// quarantined messages, at most once a minute; AgeHistory returns, per
// bucket of sample time (lo, hi], the number of samples and per queue the
// largest oldest age and waiting count (summed over the queue's owners
// within a sample, or of the given owners only); PruneAgeSamples deletes
// the samples before a time.
func testAgeHistory(t *testing.T, h Harness) {
	s := h.Open(t)
	ctx := t.Context()
	t0 := baseTime.Add(10 * time.Hour).Truncate(time.Minute).Add(15 * time.Second) // 15 s into a minute
	at := func(d time.Duration) time.Time { return t0.Add(d).Truncate(time.Microsecond) }

	edges := []time.Time{at(-time.Hour), at(time.Hour)}
	got, err := s.AgeHistory(ctx, quarantine.AgeHistoryRequest{Edges: edges})
	wantOK(t, err, "AgeHistory")
	if !slices.Equal(got.Samples, []int64{0}) || len(got.Queues) != 0 || got.Queues == nil {
		t.Fatalf("a new store's age history = %+v, want one empty bucket and no queue", got)
	}
	res, err := s.SampleAges(ctx, t0)
	wantOK(t, err, "SampleAges")
	if !res.Taken || res.Queues != 0 {
		t.Fatalf("sampling an empty store = %+v, want taken with no queue", res)
	}

	// orders: team-a, oldest failed 2 h before t0 (then discarded: the
	// next oldest is 1 h before). billing: team-a and team-b, oldest
	// team-b's at 3 h. reports: discarded only.
	o1 := newMsg(withQueue("orders"), withFailedAt(at(-2*time.Hour)))
	o2 := newMsg(withQueue("orders"), withFailedAt(at(-time.Hour)))
	o3 := newMsg(withQueue("orders"), withFailedAt(at(-10*time.Minute)))
	b1 := newMsg(withQueue("billing"), withOwner("team-b"), withFailedAt(at(-3*time.Hour)))
	b2 := newMsg(withQueue("billing"), withFailedAt(at(-30*time.Minute)))
	b3 := newMsg(withQueue("billing"), withFailedAt(at(-20*time.Minute)))
	r1 := newMsg(withQueue("reports"), withFailedAt(at(-5*time.Hour)))
	insert(t, s, o1, o2, o3, b1, b2, b3, r1)
	setStatus(t, h, s, quarantine.StatusDiscarded, r1)

	// The minute of t0 is taken already: nothing is written, whatever the
	// store holds now.
	res, err = s.SampleAges(ctx, t0.Add(40*time.Second))
	wantOK(t, err, "SampleAges")
	if res.Taken || res.Queues != 0 {
		t.Fatalf("a second sample in one minute = %+v, want nothing taken", res)
	}
	res, err = s.SampleAges(ctx, at(time.Minute))
	wantOK(t, err, "SampleAges")
	if !res.Taken || res.Queues != 3 { // orders/team-a, billing/team-a, billing/team-b
		t.Fatalf("SampleAges = %+v, want 3 (queue, owner) rows", res)
	}
	setStatus(t, h, s, quarantine.StatusDiscarded, o1)
	if res, err = s.SampleAges(ctx, at(2*time.Minute)); err != nil || !res.Taken || res.Queues != 3 {
		t.Fatalf("SampleAges = %+v, %v; want 3 rows", res, err)
	}
	setStatus(t, h, s, quarantine.StatusReplayed, b1)
	if res, err = s.SampleAges(ctx, at(3*time.Minute)); err != nil || !res.Taken || res.Queues != 2 {
		t.Fatalf("SampleAges = %+v, %v; want 2 rows (billing's team-b has none waiting)", res, err)
	}

	type want struct {
		samples []int64
		queues  map[string][2][]int64 // oldest (s), waiting per bucket
	}
	sec := func(d time.Duration) int64 { return int64(d / time.Second) }
	cases := []struct {
		name string
		r    quarantine.AgeHistoryRequest
		want want
	}{
		{"each minute, on the edges", quarantine.AgeHistoryRequest{Edges: []time.Time{at(0), at(time.Minute), at(2 * time.Minute), at(3 * time.Minute)}},
			want{[]int64{1, 1, 1}, map[string][2][]int64{
				"orders":  {{sec(2*time.Hour + time.Minute), sec(time.Hour + 2*time.Minute), sec(time.Hour + 3*time.Minute)}, {3, 2, 2}},
				"billing": {{sec(3*time.Hour + time.Minute), sec(3*time.Hour + 2*time.Minute), sec(33 * time.Minute)}, {3, 3, 2}},
			}}},
		{"one bucket holds every sample", quarantine.AgeHistoryRequest{Edges: []time.Time{at(-time.Minute), at(time.Hour)}},
			want{[]int64{4}, map[string][2][]int64{
				"orders":  {{sec(2*time.Hour + time.Minute)}, {3}},
				"billing": {{sec(3*time.Hour + 2*time.Minute)}, {3}},
			}}},
		{"a scoped view", quarantine.AgeHistoryRequest{Owners: []string{"team-b"},
			Edges: []time.Time{at(30 * time.Second), at(90 * time.Second), at(4 * time.Minute)}},
			want{[]int64{1, 2}, map[string][2][]int64{
				"billing": {{sec(3*time.Hour + time.Minute), sec(3*time.Hour + 2*time.Minute)}, {1, 1}},
			}}},
		{"just after the samples", quarantine.AgeHistoryRequest{Edges: []time.Time{at(3 * time.Minute), at(time.Hour)}},
			want{[]int64{0}, map[string][2][]int64{}}},
	}
	check := func(name string, r quarantine.AgeHistoryRequest, w want) {
		t.Helper()
		got, err := s.AgeHistory(ctx, r)
		wantOK(t, err, "AgeHistory "+name)
		if !slices.Equal(got.Samples, w.samples) {
			t.Fatalf("%s: samples per bucket = %v, want %v", name, got.Samples, w.samples)
		}
		var names []string
		for _, q := range got.Queues {
			names = append(names, q.Queue)
			wq, ok := w.queues[q.Queue]
			if !ok {
				t.Fatalf("%s: unexpected queue %q: %+v", name, q.Queue, q)
			}
			oldest := make([]int64, len(q.Oldest))
			for i, d := range q.Oldest {
				oldest[i] = sec(d)
				if d%time.Microsecond != 0 {
					t.Fatalf("%s: %s oldest %v is not whole microseconds", name, q.Queue, d)
				}
			}
			if !slices.Equal(oldest, wq[0]) || !slices.Equal(q.Waiting, wq[1]) {
				t.Fatalf("%s: %s oldest %v s, waiting %v; want %v s, %v", name, q.Queue, oldest, q.Waiting, wq[0], wq[1])
			}
		}
		if len(names) != len(w.queues) || !slices.IsSorted(names) {
			t.Fatalf("%s: queues %v, want the %d of %v by name", name, names, len(w.queues), w.queues)
		}
	}
	for _, c := range cases {
		check(c.name, c.r, c.want)
	}
	// An age is exact to the microsecond: sampled_at - failed_at.
	got, err = s.AgeHistory(ctx, quarantine.AgeHistoryRequest{Edges: []time.Time{at(0), at(time.Minute)}})
	wantOK(t, err, "AgeHistory")
	if len(got.Queues) != 2 || got.Queues[1].Oldest[0] != 2*time.Hour+time.Minute {
		t.Fatalf("orders' oldest at t0+1m = %+v, want exactly 2h1m", got.Queues)
	}

	// Pruning before the third sample deletes the first two minutes
	// (t0's, of the empty store, and t0+1m's).
	n, err := s.PruneAgeSamples(ctx, at(2*time.Minute))
	wantOK(t, err, "PruneAgeSamples")
	if n != 2 {
		t.Fatalf("PruneAgeSamples = %d, want 2 sample minutes", n)
	}
	check("after the prune", quarantine.AgeHistoryRequest{Edges: []time.Time{at(-time.Hour), at(90 * time.Second), at(time.Hour)}},
		want{[]int64{0, 2}, map[string][2][]int64{
			"orders":  {{0, sec(time.Hour + 3*time.Minute)}, {0, 2}},
			"billing": {{0, sec(3*time.Hour + 2*time.Minute)}, {0, 3}},
		}})
	// A pruned minute is not taken any more: it may be sampled again.
	if res, err := s.SampleAges(ctx, t0); err != nil || !res.Taken {
		t.Fatalf("SampleAges of a pruned minute = %+v, %v; want taken", res, err)
	}

	for _, r := range []quarantine.AgeHistoryRequest{
		{Edges: edges[:1]},
		{Edges: []time.Time{at(time.Hour), at(0)}},
		{Edges: []time.Time{at(0), at(0).Add(999)}},
		{Edges: make([]time.Time, quarantine.MaxHistogramBuckets+2)},
		{Edges: edges, Owners: []string{"bad\x00owner"}},
	} {
		_, err := s.AgeHistory(ctx, r)
		wantCode(t, err, quarantine.EINVALID)
	}
}

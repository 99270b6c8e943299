package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// AgeHistory: SampleAges samples each queue and owner with quarantined
// messages at most once a minute and folds the sample into its quarter of
// an hour; AgeHistory returns per step the number of samples and per
// queue the largest oldest age and waiting count (over all owners, or of
// the given owners: the largest age, their largest waiting counts
// summed); PruneAgeSamples deletes the steps before a time.
func testAgeHistory(t *testing.T, h Harness) {
	s := h.Open(t)
	ctx := t.Context()
	step := quarantine.AgeHistoryStep
	q0 := baseTime.Add(10 * time.Hour).Truncate(step) // a step's start
	at := func(d time.Duration) time.Time { return q0.Add(d) }

	got, err := s.AgeHistory(ctx, quarantine.AgeHistoryRequest{From: at(-time.Hour), To: at(time.Hour)})
	wantOK(t, err, "AgeHistory")
	if len(got.Steps) != 9 || !got.Steps[0].Equal(at(-time.Hour)) || got.Samples[4] != 0 || len(got.Queues) != 0 || got.Queues == nil {
		t.Fatalf("a new store's age history = %+v, want 9 empty steps from %v and no queue", got, at(-time.Hour))
	}
	res, err := s.SampleAges(ctx, at(75*time.Second))
	wantOK(t, err, "SampleAges")
	if !res.Taken || res.Queues != 0 {
		t.Fatalf("sampling an empty store = %+v, want taken with no queue", res)
	}

	// orders: team-a, oldest failed 2 h before q0 (then discarded: the
	// next oldest is 1 h before). billing: team-a and team-b, oldest
	// team-b's at 3 h (then replayed). reports: discarded only.
	o1 := newMsg(withQueue("orders"), withFailedAt(at(-2*time.Hour)))
	o2 := newMsg(withQueue("orders"), withFailedAt(at(-time.Hour)))
	o3 := newMsg(withQueue("orders"), withFailedAt(at(-10*time.Minute)))
	b1 := newMsg(withQueue("billing"), withOwner("team-b"), withFailedAt(at(-3*time.Hour)))
	b2 := newMsg(withQueue("billing"), withFailedAt(at(-30*time.Minute)))
	b3 := newMsg(withQueue("billing"), withFailedAt(at(-20*time.Minute)))
	r1 := newMsg(withQueue("reports"), withFailedAt(at(-5*time.Hour)))
	insert(t, s, o1, o2, o3, b1, b2, b3, r1)
	setStatus(t, h, s, quarantine.StatusDiscarded, r1)

	// The minute of the first sample is taken: nothing is written,
	// whatever the store holds now.
	if res, err = s.SampleAges(ctx, at(100*time.Second)); err != nil || res.Taken || res.Queues != 0 {
		t.Fatalf("a second sample in one minute = %+v, %v; want nothing taken", res, err)
	}
	sample := func(d time.Duration, queues int) {
		t.Helper()
		res, err := s.SampleAges(ctx, at(d))
		if err != nil || !res.Taken || res.Queues != queues {
			t.Fatalf("SampleAges at q0+%v = %+v, %v; want %d (queue, owner) pairs", d, res, err, queues)
		}
	}
	sample(2*time.Minute, 3) // orders/team-a, billing/team-a, billing/team-b
	setStatus(t, h, s, quarantine.StatusDiscarded, o1)
	sample(3*time.Minute, 3)
	setStatus(t, h, s, quarantine.StatusReplayed, b1)
	sample(16*time.Minute, 2) // the next step; billing's team-b has none waiting

	type queueWant struct {
		oldest  []time.Duration
		waiting []int64
	}
	hm := func(h, m int) time.Duration { return time.Duration(h)*time.Hour + time.Duration(m)*time.Minute }
	check := func(name string, r quarantine.AgeHistoryRequest, samples []int64, want map[string]queueWant) {
		t.Helper()
		got, err := s.AgeHistory(ctx, r)
		wantOK(t, err, "AgeHistory "+name)
		if !slices.Equal(got.Samples, samples) || len(got.Steps) != len(samples) {
			t.Fatalf("%s: samples per step = %v (%d steps), want %v", name, got.Samples, len(got.Steps), samples)
		}
		for i, st := range got.Steps {
			if !st.Equal(r.From.Truncate(step).Add(time.Duration(i) * step)) {
				t.Fatalf("%s: step %d starts at %v", name, i, st)
			}
		}
		var names []string
		for _, q := range got.Queues {
			names = append(names, q.Queue)
			w, ok := want[q.Queue]
			if !ok {
				t.Fatalf("%s: unexpected queue %q: %+v", name, q.Queue, q)
			}
			if !slices.Equal(q.Oldest, w.oldest) || !slices.Equal(q.Waiting, w.waiting) {
				t.Fatalf("%s: %s oldest %v, waiting %v; want %v, %v", name, q.Queue, q.Oldest, q.Waiting, w.oldest, w.waiting)
			}
		}
		if len(names) != len(want) || !slices.IsSorted(names) {
			t.Fatalf("%s: queues %v, want the %d of %v by name", name, names, len(want), want)
		}
	}
	// Ages are exact: sampled_at - failed_at.
	check("all owners", quarantine.AgeHistoryRequest{From: at(-time.Hour), To: at(30*time.Minute + time.Second)},
		[]int64{0, 0, 0, 0, 3, 1, 0}, map[string]queueWant{
			"orders":  {[]time.Duration{0, 0, 0, 0, hm(2, 2), hm(1, 16), 0}, []int64{0, 0, 0, 0, 3, 2, 0}},
			"billing": {[]time.Duration{0, 0, 0, 0, hm(3, 3), hm(0, 46), 0}, []int64{0, 0, 0, 0, 3, 2, 0}},
		})
	check("one owner", quarantine.AgeHistoryRequest{Owners: []string{"team-b"}, From: at(time.Minute), To: at(20 * time.Minute)},
		[]int64{3, 1}, map[string]queueWant{
			"billing": {[]time.Duration{hm(3, 3), 0}, []int64{1, 0}},
		})
	check("two owners", quarantine.AgeHistoryRequest{Owners: []string{"team-a", "team-b"}, From: at(0), To: at(15 * time.Minute)},
		[]int64{3, 1}, map[string]queueWant{
			"orders":  {[]time.Duration{hm(2, 2), hm(1, 16)}, []int64{3, 2}},
			"billing": {[]time.Duration{hm(3, 3), hm(0, 46)}, []int64{3, 2}}, // team-a's largest 2 + team-b's 1
		})
	check("one step", quarantine.AgeHistoryRequest{From: at(15 * time.Minute), To: at(29 * time.Minute)},
		[]int64{1}, map[string]queueWant{
			"orders":  {[]time.Duration{hm(1, 16)}, []int64{2}},
			"billing": {[]time.Duration{hm(0, 46)}, []int64{2}},
		})

	// Pruning before q0+15m30s deletes the first step and the three
	// minutes sampled before.
	n, err := s.PruneAgeSamples(ctx, at(15*time.Minute+30*time.Second))
	wantOK(t, err, "PruneAgeSamples")
	if n != 3 {
		t.Fatalf("PruneAgeSamples = %d, want 3 sample minutes", n)
	}
	check("after the prune", quarantine.AgeHistoryRequest{From: at(0), To: at(15 * time.Minute)},
		[]int64{0, 1}, map[string]queueWant{
			"orders":  {[]time.Duration{0, hm(1, 16)}, []int64{0, 2}},
			"billing": {[]time.Duration{0, hm(0, 46)}, []int64{0, 2}},
		})
	// A pruned minute is not taken any more: it may be sampled again.
	sample(75*time.Second, 2)

	for _, r := range []quarantine.AgeHistoryRequest{
		{From: at(time.Hour), To: at(0)},
		{From: at(0), To: at(quarantine.MaxAgeHistorySteps * step)},
		{From: at(0), To: at(time.Hour), Owners: []string{"bad\x00owner"}},
	} {
		_, err := s.AgeHistory(ctx, r)
		wantCode(t, err, quarantine.EINVALID)
	}
	if _, err := s.AgeHistory(ctx, quarantine.AgeHistoryRequest{From: at(0), To: at((quarantine.MaxAgeHistorySteps - 1) * step)}); err != nil {
		t.Fatalf("a week of steps: %v", err)
	}
}

package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// expectedHistogram is the reference model of Histogram.
func expectedHistogram(r quarantine.HistogramRequest, msgs []*quarantine.Message) []quarantine.QueueHistogram {
	out := make([]quarantine.QueueHistogram, len(r.Queues))
	for i, q := range r.Queues {
		out[i] = quarantine.QueueHistogram{Queue: q, Counts: make([]int64, len(r.Edges)-1)}
		for _, m := range msgs {
			if m.Queue != q || len(r.Owners) > 0 && !slices.Contains(r.Owners, m.Owner) {
				continue
			}
			t := m.CollectedAt
			if r.Kind == quarantine.HistogramWaiting {
				if m.Status != quarantine.StatusQuarantined {
					continue
				}
				t = m.FailedAt
			}
			t = t.Truncate(time.Microsecond)
			for b := range out[i].Counts {
				if t.After(r.Edges[b].Truncate(time.Microsecond)) && !t.After(r.Edges[b+1].Truncate(time.Microsecond)) {
					out[i].Counts[b]++
				}
			}
		}
	}
	return out
}

func testHistogram(t *testing.T, h Harness) {
	now := baseTime.Add(72 * time.Hour).Truncate(time.Microsecond)
	// The store's clock at now: the kept minutes of the last day count.
	s := h.OpenClock(t, func() time.Time { return now })
	ctx := t.Context()
	// Times on both sides of the hourly edges, on them, and outside.
	offsets := []time.Duration{0, time.Microsecond, -time.Microsecond, time.Minute, 59 * time.Minute,
		time.Hour, time.Hour + time.Microsecond, 90 * time.Minute, 5 * time.Hour, 23*time.Hour + 59*time.Minute,
		24 * time.Hour, 24*time.Hour + time.Microsecond, 30 * time.Hour}
	queues := []string{"orders", "billing", "reports"}
	var msgs []*quarantine.Message
	for i := range 60 {
		m := newMsg(withQueue(queues[i%3]), withOwner([]string{"team-a", "team-b"}[i%2]))
		m.CollectedAt = now.Add(-offsets[i%len(offsets)])
		// failed_at lies elsewhere than collected_at: the kinds must
		// not mix their columns up.
		m.FailedAt = m.CollectedAt.Add(-time.Duration(i%4) * 45 * time.Minute)
		msgs = append(msgs, m)
	}
	// Messages on the whole hours before now and a microsecond either
	// side: the stores keep the inflow by the hour, (h, h+1h].
	top := now.Truncate(time.Hour)
	for i, d := range []time.Duration{0, time.Microsecond, -time.Microsecond, 3 * time.Hour, 3*time.Hour + time.Microsecond,
		3*time.Hour - time.Microsecond, 23 * time.Hour, 24 * time.Hour, 25 * time.Hour} {
		m := newMsg(withQueue(queues[i%3]), withOwner([]string{"team-a", "team-b"}[i%2]))
		m.CollectedAt = top.Add(-d)
		m.FailedAt = m.CollectedAt
		msgs = append(msgs, m)
	}
	insert(t, s, msgs...)
	spreadStatuses(t, h, s, msgs, 5, 1, 3)

	hourly := make([]time.Time, 25)
	for i := range hourly {
		hourly[i] = now.Add(time.Duration(i-24) * time.Hour)
	}
	uneven := []time.Time{now.Add(-7 * 24 * time.Hour), now.Add(-24 * time.Hour), now.Add(-6 * time.Hour),
		now.Add(-time.Hour), now.Add(-5 * time.Minute), now}
	withNanos := []time.Time{now.Add(-2*time.Hour + 999), now.Add(-time.Hour + 1), now.Add(500)}
	// The overview's edges: the whole hours of the last day, then now.
	var wholeHours []time.Time
	for i := 23; i >= 0; i-- {
		wholeHours = append(wholeHours, top.Add(-time.Duration(i)*time.Hour))
	}
	upToNow := append(slices.Clone(wholeHours), now)
	// Whole hours inside a bucket with ends off the hour.
	straddling := []time.Time{top.Add(-26*time.Hour - time.Minute), top.Add(-3*time.Hour + time.Microsecond), top.Add(-90 * time.Minute), now}
	cases := []quarantine.HistogramRequest{
		{Kind: quarantine.HistogramInflow, Queues: queues, Edges: hourly},
		{Kind: quarantine.HistogramWaiting, Queues: queues, Edges: hourly},
		{Kind: quarantine.HistogramInflow, Queues: []string{"reports", "nope", "orders"}, Edges: uneven},
		{Kind: quarantine.HistogramWaiting, Queues: []string{"billing", "orders"}, Edges: uneven, Owners: []string{"team-b"}},
		{Kind: quarantine.HistogramInflow, Queues: queues, Edges: hourly, Owners: []string{"team-a", "team-c"}},
		{Kind: quarantine.HistogramInflow, Queues: queues, Edges: withNanos},
		{Kind: quarantine.HistogramWaiting, Queues: []string{"orders"}, Edges: []time.Time{now.Add(-48 * time.Hour), now.Add(time.Hour)}},
		{Kind: quarantine.HistogramInflow, Queues: queues, Edges: wholeHours},
		{Kind: quarantine.HistogramInflow, Queues: queues, Edges: upToNow},
		{Kind: quarantine.HistogramInflow, Queues: []string{"billing", "orders"}, Edges: upToNow, Owners: []string{"team-b"}},
		{Kind: quarantine.HistogramInflow, Queues: queues, Edges: straddling},
		{Kind: quarantine.HistogramWaiting, Queues: queues, Edges: upToNow},
	}
	for _, r := range cases {
		got, err := s.Histogram(ctx, r)
		wantOK(t, err, "Histogram")
		want := expectedHistogram(r, msgs)
		if len(got) != len(want) {
			t.Fatalf("Histogram(%s %v owners %v) = %d queues, want %d", r.Kind, r.Queues, r.Owners, len(got), len(want))
		}
		for i := range want {
			if got[i].Queue != want[i].Queue || !slices.Equal(got[i].Counts, want[i].Counts) {
				t.Fatalf("Histogram(%s %v owners %v edges %v): queue %d\n%s", r.Kind, r.Queues, r.Owners, r.Edges, i, diffAt(got, want, i))
			}
		}
	}
	// The model is not vacuous: the hourly inflow of the three queues sums
	// to QueueStats' 24-hour inflow (whose windows end at the end of
	// now's minute), and messages sit on the edges.
	end := now.Truncate(time.Minute).Add(time.Minute)
	day := make([]time.Time, 25)
	for i := range day {
		day[i] = end.Add(time.Duration(i-24) * time.Hour)
	}
	got, err := s.Histogram(ctx, quarantine.HistogramRequest{Kind: quarantine.HistogramInflow, Queues: queues, Edges: day})
	wantOK(t, err, "Histogram")
	stats, err := s.QueueStats(ctx, quarantine.Filter{}, now)
	wantOK(t, err, "QueueStats")
	var sum, in24 int64
	for _, q := range got {
		for _, n := range q.Counts {
			sum += n
		}
	}
	for _, st := range stats {
		in24 += st.Inflow24h
	}
	if sum != in24 || sum == 0 {
		t.Fatalf("the hourly inflow sums to %d, QueueStats' 24 h inflow is %d", sum, in24)
	}

	bad := []quarantine.HistogramRequest{
		{Kind: "depth", Queues: queues, Edges: hourly},
		{Kind: quarantine.HistogramInflow, Edges: hourly},
		{Kind: quarantine.HistogramInflow, Queues: []string{"orders", "orders"}, Edges: hourly},
		{Kind: quarantine.HistogramInflow, Queues: queues, Edges: hourly[:1]},
		{Kind: quarantine.HistogramInflow, Queues: queues, Edges: []time.Time{now, now.Add(-time.Hour)}},
		{Kind: quarantine.HistogramInflow, Queues: queues, Edges: []time.Time{now, now.Add(999)}},
		{Kind: quarantine.HistogramInflow, Queues: []string{"bad\x00queue"}, Edges: hourly},
		{Kind: quarantine.HistogramInflow, Queues: queues, Edges: make([]time.Time, quarantine.MaxHistogramBuckets+2)},
	}
	for _, r := range bad {
		_, err := s.Histogram(ctx, r)
		wantCode(t, err, quarantine.EINVALID)
	}
}

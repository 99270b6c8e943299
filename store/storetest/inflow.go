package storetest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store"
)

// testInflowCounters moves the store's clock over 27 hours, across minute
// and hour boundaries, inserting messages collected (and failed) on both
// sides of them (and duplicates, which are not new), discarding,
// replaying and purging some, and pruning the kept minutes as the age
// sampler does each hour; after each step the inflow of QueueStats and
// of Histogram, and the waiting Histogram, equal the count of the stored
// messages in the same windows. Inflow is
// what was collected: a discarded, replayed or purged message still
// counts in the windows of its collected_at.
func testInflowCounters(t *testing.T, h Harness) {
	start := time.Date(2025, 3, 1, 10, 58, 30, 0, time.UTC)
	var clock atomic.Int64
	clock.Store(start.UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()).UTC() }
	s := h.OpenClock(t, now)
	ctx := t.Context()
	queues := []string{"orders", "billing"}
	owners := []string{"team-a", "team-b"}
	var msgs []*quarantine.Message
	steps := []time.Duration{0, 17 * time.Second, 43 * time.Second, time.Minute, 29 * time.Second, 59 * time.Minute,
		time.Minute + time.Microsecond, 3 * time.Hour, 4*time.Minute + 59*time.Second, 10 * time.Hour, 7 * time.Hour,
		time.Hour, 30 * time.Minute, 4*time.Hour + 2*time.Minute, 31 * time.Second}
	for k, d := range steps {
		clock.Add(int64(d))
		at := now().Truncate(time.Microsecond)
		minute := at.Truncate(time.Minute)
		// Collected now, on the minute and on the hour and a microsecond
		// either side, and a little earlier.
		var batch []*quarantine.Message
		for i, c := range []time.Time{at, minute, minute.Add(time.Microsecond), minute.Add(-time.Microsecond),
			at.Truncate(time.Hour), at.Truncate(time.Hour).Add(time.Microsecond), at.Add(-4 * time.Minute), at.Add(-61 * time.Minute)} {
			m := newMsg(withQueue(queues[(k+i)%2]), withOwner(owners[i%2]), withDedupe(fmt.Sprintf("inflow-%d-%d", k, i)))
			m.CollectedAt, m.FailedAt = c, c.Add(-time.Minute)
			batch = append(batch, m)
		}
		// A delivery seen again: not new, not counted twice.
		if k > 0 {
			again := *msgs[len(msgs)-1]
			again.ID, again.CollectedAt = "", at
			batch = append(batch, &again)
		}
		res, err := s.InsertBatch(ctx, batch)
		wantOK(t, err, "InsertBatch")
		for i, r := range res {
			if r.New {
				msgs = append(msgs, batch[i])
			}
		}
		switch k % 4 {
		case 1:
			var ids []string
			for _, m := range msgs[len(msgs)-3:] {
				if m.Status == quarantine.StatusQuarantined {
					ids = append(ids, m.ID)
					m.Status = quarantine.StatusDiscarded
				}
			}
			_, err = s.Discard(ctx, quarantine.Discard{IDs: ids, Reason: "inflow", Actor: "bob"})
			wantOK(t, err, "Discard")
		case 2:
			setStatus(t, h, s, quarantine.StatusReplayed, msgs[len(msgs)-6:len(msgs)-4]...)
		case 3:
			_, err = s.PurgePayloads(ctx, quarantine.StatusReplayed, at.Add(time.Hour), 100, "retention")
			wantOK(t, err, "PurgePayloads")
		}
		_, err = s.PruneAgeSamples(ctx, at.Add(-quarantine.DefaultAgeHistoryKeep))
		wantOK(t, err, "PruneAgeSamples")
		checkInflow(t, s, msgs, at, fmt.Sprintf("step %d at %v", k, at))
	}
	// The counts are read, not the messages: a tampered minute count
	// shows in the 5-minute inflow.
	h.Exec(t, s, `UPDATE inflow_minutes SET n = n + 1000`)
	stats, err := s.QueueStats(ctx, quarantine.Filter{}, now())
	wantOK(t, err, "QueueStats")
	for _, st := range stats {
		if st.Inflow5m < 1000 {
			t.Fatalf("queue %s: 5-minute inflow %d after adding 1000 to each kept minute: not read from the counts", st.Queue, st.Inflow5m)
		}
	}
}

// checkInflow compares the inflow of QueueStats (every filter the kept
// counts answer, now and off the minute) and of Histogram (the overview's
// sparklines, and edges on and off the minutes, within and beyond the
// kept minutes) with the messages.
func checkInflow(t *testing.T, s store.Store, msgs []*quarantine.Message, at time.Time, step string) {
	t.Helper()
	ctx := t.Context()
	for _, f := range []quarantine.Filter{{}, {Owner: []string{"team-a"}}, {Queue: []string{"billing"}}, {Status: []quarantine.Status{quarantine.StatusQuarantined}}} {
		for _, n := range []time.Time{at, at.Add(-17 * time.Second), at.Truncate(time.Minute)} {
			got, err := s.QueueStats(ctx, f, n)
			wantOK(t, err, "QueueStats")
			if want := expectedQueueStats(f, msgs, n); !sameQueueStats(got, want) {
				t.Fatalf("%s: QueueStats(%+v, %v) =\n%+v\nwant\n%+v", step, f, n, got, want)
			}
		}
	}
	end := at.Truncate(time.Minute).Add(time.Minute)
	top := at.Truncate(time.Hour)
	var sparkline []time.Time
	for i := 23; i >= 0; i-- {
		sparkline = append(sparkline, top.Add(-time.Duration(i)*time.Hour))
	}
	for _, edges := range [][]time.Time{
		append(sparkline, end),
		append(sparkline, at),
		{end.Add(-26 * time.Hour), end.Add(-25*time.Hour + 7*time.Minute), end.Add(-3 * time.Hour), end.Add(-2 * time.Minute), end},
		{at.Add(-24*time.Hour - 90*time.Second), at.Add(-time.Hour), at.Add(-5 * time.Minute), at},
	} {
		for _, k := range []quarantine.HistogramKind{quarantine.HistogramInflow, quarantine.HistogramWaiting} {
			r := quarantine.HistogramRequest{Kind: k, Queues: []string{"orders", "billing", "nope"}, Edges: edges}
			for _, owners := range [][]string{nil, {"team-b"}} {
				r.Owners = owners
				got, err := s.Histogram(ctx, r)
				wantOK(t, err, "Histogram")
				want := expectedHistogram(r, msgs)
				for i := range want {
					if got[i].Queue != want[i].Queue || fmt.Sprint(got[i].Counts) != fmt.Sprint(want[i].Counts) {
						t.Fatalf("%s: Histogram(%s, owners %v, edges %v): queue %d\n%s", step, k, owners, edges, i, diffAt(got, want, i))
					}
				}
			}
		}
	}
}

// withKeptCountsChecked is h whose stores are checked when their test
// ends (unless it failed): the waiting and inflow histograms read from
// the kept counts equal the stored messages', whatever the test did to
// them (inserts, discards, replays through the store's own moves,
// re-failures, raw status changes).
func withKeptCountsChecked(h Harness) Harness {
	open, openClock := h.Open, h.OpenClock
	h.Open = func(t *testing.T) store.Store {
		s := open(t)
		t.Cleanup(func() { checkKeptCounts(t, s) })
		return s
	}
	if openClock != nil {
		h.OpenClock = func(t *testing.T, now func() time.Time) store.Store {
			s := openClock(t, now)
			t.Cleanup(func() { checkKeptCounts(t, s) })
			return s
		}
	}
	return h
}

// checkKeptCounts compares the waiting histogram of every queue of s
// (over edges on and off the minute around the messages) with its
// messages.
func checkKeptCounts(t *testing.T, s store.Store) {
	if t.Failed() {
		return
	}
	ctx := context.Background()
	var msgs []*quarantine.Message
	f := quarantine.Filter{Limit: quarantine.MaxLimit}
	for {
		p, err := s.ListMessages(ctx, f)
		if err != nil {
			return // a store the test closed, or left unusable on purpose
		}
		msgs = append(msgs, p.Messages...)
		if p.Next == nil {
			break
		}
		f.After = p.Next
	}
	if len(msgs) == 0 {
		return
	}
	seen := map[string]bool{}
	var queues []string
	lo, hi := msgs[0].FailedAt, msgs[0].FailedAt
	for _, m := range msgs {
		if m.FailedAt.Before(lo) {
			lo = m.FailedAt
		}
		if m.FailedAt.After(hi) {
			hi = m.FailedAt
		}
		if seen[m.Queue] {
			continue
		}
		seen[m.Queue] = true
		one := quarantine.HistogramRequest{Kind: quarantine.HistogramWaiting, Queues: []string{m.Queue}, Edges: []time.Time{lo, lo.Add(time.Second)}}
		if one.Validate() == nil && len(queues) < quarantine.MaxHistogramQueues {
			queues = append(queues, m.Queue)
		}
	}
	if len(queues) == 0 {
		return
	}
	mid := lo.Add(hi.Sub(lo) / 2).Truncate(time.Microsecond)
	edges := []time.Time{lo.Add(-time.Hour).Truncate(time.Minute), lo.Add(-time.Microsecond)}
	for _, e := range []time.Time{mid.Add(-time.Minute).Truncate(time.Minute), mid, mid.Add(time.Minute).Truncate(time.Minute), hi.Add(time.Hour)} {
		if e.After(edges[len(edges)-1].Truncate(time.Microsecond)) {
			edges = append(edges, e)
		}
	}
	r := quarantine.HistogramRequest{Kind: quarantine.HistogramWaiting, Queues: queues, Edges: edges}
	got, err := s.Histogram(ctx, r)
	if err != nil {
		t.Errorf("kept counts: Histogram: %v", err)
		return
	}
	want := expectedHistogram(r, msgs)
	for i := range want {
		if got[i].Queue != want[i].Queue || fmt.Sprint(got[i].Counts) != fmt.Sprint(want[i].Counts) {
			t.Errorf("kept counts at the end of the test: waiting Histogram(edges %v): queue %d\n%s", edges, i, diffAt(got, want, i))
			return
		}
	}
}

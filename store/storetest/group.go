package storetest

import (
	"cmp"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// expectedGroups is the reference model of Groups: the latest failure (by
// failed_at, then id) is the example.
func expectedGroups(f quarantine.Filter, msgs []*quarantine.Message) []quarantine.Group {
	f.After = nil
	if f.Limit == 0 {
		f.Limit = quarantine.DefaultLimit
	}
	byFP := map[string]*quarantine.Group{}
	example := map[string]*quarantine.Message{}
	for _, m := range msgs {
		if !matches(f, m) {
			continue
		}
		g, ok := byFP[m.Fingerprint]
		if !ok {
			g = &quarantine.Group{Fingerprint: m.Fingerprint, FirstFailedAt: m.FailedAt, LastFailedAt: m.FailedAt}
			byFP[m.Fingerprint] = g
		}
		g.Count++
		if m.FailedAt.Before(g.FirstFailedAt) {
			g.FirstFailedAt = m.FailedAt
		}
		if m.FailedAt.After(g.LastFailedAt) {
			g.LastFailedAt = m.FailedAt
		}
		if !slices.Contains(g.Queues, m.Queue) {
			g.Queues = append(g.Queues, m.Queue)
		}
		if e := example[m.Fingerprint]; e == nil || m.FailedAt.After(e.FailedAt) || m.FailedAt.Equal(e.FailedAt) && m.ID > e.ID {
			example[m.Fingerprint] = m
		}
	}
	out := []quarantine.Group{}
	for fp, g := range byFP {
		e := example[fp]
		g.ExampleID, g.JobName, g.FailureClass, g.Reason = e.ID, e.JobName, e.FailureClass, quarantine.NormalizeReason(e.Reason)
		slices.Sort(g.Queues)
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, b quarantine.Group) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), b.LastFailedAt.Compare(a.LastFailedAt), cmp.Compare(a.Fingerprint, b.Fingerprint))
	})
	return out[:min(len(out), f.Limit)]
}

func sameGroups(a, b []quarantine.Group) bool {
	return slices.EqualFunc(a, b, func(x, y quarantine.Group) bool {
		return x.Fingerprint == y.Fingerprint && x.Count == y.Count && x.FirstFailedAt.Equal(y.FirstFailedAt) &&
			x.LastFailedAt.Equal(y.LastFailedAt) && slices.Equal(x.Queues, y.Queues) && x.ExampleID == y.ExampleID &&
			x.JobName == y.JobName && x.FailureClass == y.FailureClass && x.Reason == y.Reason
	})
}

// groupFilters are filters each store answers in its own way: some from
// maintained counts, some by grouping the messages.
func groupFilters() []quarantine.Filter {
	return []quarantine.Filter{
		{},
		{Limit: 3},
		{Queue: []string{"billing"}},
		{Status: []quarantine.Status{quarantine.StatusQuarantined}},
		{Status: []quarantine.Status{quarantine.StatusDiscarded, quarantine.StatusReplayed}, Owner: []string{"team-a", ""}},
		{JobName: []string{"charge"}, FailureClass: []quarantine.FailureClass{quarantine.ClassExhausted, quarantine.ClassPermanent}},
		{Source: []string{"src-b"}},
		{Text: "disk"},
		{FailedAfter: baseTime.Add(5 * time.Minute).Truncate(time.Microsecond)},
		{IdempotencyKey: []string{"idem-3", "idem-4"}, Queue: []string{"orders"}},
		{Queue: []string{"nope"}},
	}
}

func testGroups(t *testing.T, h Harness) {
	s := h.Open(t)
	ctx := t.Context()
	msgs := listDataset(t, h, s)
	check := func(when string) {
		t.Helper()
		for _, f := range groupFilters() {
			got, err := s.Groups(ctx, f)
			wantOK(t, err, "Groups")
			if want := expectedGroups(f, msgs); !sameGroups(got, want) {
				i := 0
				for i < min(len(got), len(want)) && sameGroups(got[i:i+1], want[i:i+1]) {
					i++
				}
				t.Fatalf("%s: Groups(%+v): %d groups, want %d; first difference at %d:\n%s", when, f, len(got), len(want), i, diffAt(got, want, i))
			}
		}
	}
	check("after insert")
	// Status changes move messages between the maintained buckets; the
	// latest and the earliest of a group leave first, so the bounds are
	// recounted.
	byGroup := map[string][]*quarantine.Message{}
	for _, m := range msgs {
		byGroup[m.Fingerprint] = append(byGroup[m.Fingerprint], m)
	}
	var ids []string
	for _, g := range byGroup {
		sortDesc(g)
		for _, m := range []*quarantine.Message{g[0], g[len(g)-1]} {
			if m.Status == quarantine.StatusQuarantined && !slices.Contains(ids, m.ID) {
				ids = append(ids, m.ID)
				m.Status = quarantine.StatusDiscarded
			}
		}
	}
	_, err := s.Discard(ctx, quarantine.Discard{IDs: ids, Reason: "edges", Actor: "bob"})
	wantOK(t, err, "Discard")
	check("after discarding the edges")
	var back []*quarantine.Message
	for _, m := range msgs {
		if m.Status == quarantine.StatusReplayed {
			back = append(back, m)
		}
	}
	setStatus(t, h, s, quarantine.StatusRefailed, back...)
	check("after a raw status change")
	_, err = s.Groups(ctx, quarantine.Filter{Limit: -1})
	wantCode(t, err, quarantine.EINVALID)
}

// expectedQueueStats is the reference model of QueueStats: the queues
// and counts of the messages matching f; the inflow of each such queue
// counts the messages matching f but its statuses (what was collected,
// whatever its status now).
func expectedQueueStats(f quarantine.Filter, msgs []*quarantine.Message, now time.Time) []quarantine.QueueStats {
	f.After = nil
	anyStatus := f
	anyStatus.Status = nil
	by := map[string]*quarantine.QueueStats{}
	var out []*quarantine.QueueStats
	for _, m := range msgs {
		if !matches(f, m) {
			continue
		}
		st := by[m.Queue]
		if st == nil {
			st = &quarantine.QueueStats{Queue: m.Queue, Counts: map[quarantine.Status]int64{}}
			for _, s := range quarantine.Statuses {
				st.Counts[s] = 0
			}
			by[m.Queue] = st
			out = append(out, st)
		}
		st.Counts[m.Status]++
		if m.Status == quarantine.StatusQuarantined {
			if o := st.OldestQuarantinedAt; o == nil || m.FailedAt.Before(*o) || m.FailedAt.Equal(*o) && m.ID < st.OldestID {
				at := m.FailedAt
				st.OldestQuarantinedAt, st.OldestID = &at, m.ID
			}
		}
	}
	for _, m := range msgs {
		st := by[m.Queue]
		if st == nil || !matches(anyStatus, m) {
			continue
		}
		// The windows end at the end of now's minute.
		end := now.Truncate(time.Microsecond)
		if whole := end.Truncate(time.Minute); whole.Before(end) {
			end = whole.Add(time.Minute)
		}
		for _, w := range []struct {
			d time.Duration
			n *int64
		}{{5 * time.Minute, &st.Inflow5m}, {time.Hour, &st.Inflow1h}, {24 * time.Hour, &st.Inflow24h}} {
			if c := m.CollectedAt.Truncate(time.Microsecond); c.After(end.Add(-w.d)) && !c.After(end) {
				*w.n++
			}
		}
	}
	slices.SortFunc(out, func(a, b *quarantine.QueueStats) int { return cmp.Compare(a.Queue, b.Queue) })
	res := []quarantine.QueueStats{}
	for _, st := range out {
		res = append(res, *st)
	}
	return res
}

func sameQueueStats(a, b []quarantine.QueueStats) bool {
	return slices.EqualFunc(a, b, func(x, y quarantine.QueueStats) bool {
		sameOldest := (x.OldestQuarantinedAt == nil) == (y.OldestQuarantinedAt == nil) &&
			(x.OldestQuarantinedAt == nil || x.OldestQuarantinedAt.Equal(*y.OldestQuarantinedAt) && x.OldestID == y.OldestID)
		return x.Queue == y.Queue && x.Owner == y.Owner && sameOldest && len(x.Counts) == len(y.Counts) &&
			x.Inflow5m == y.Inflow5m && x.Inflow1h == y.Inflow1h && x.Inflow24h == y.Inflow24h &&
			slices.EqualFunc(quarantine.Statuses, quarantine.Statuses, func(s, _ quarantine.Status) bool { return x.Counts[s] == y.Counts[s] })
	})
}

func testQueueStats(t *testing.T, h Harness) {
	now := baseTime.Add(72 * time.Hour).Truncate(time.Microsecond)
	// The store's clock at now: the kept minutes of the last day count.
	s := h.OpenClock(t, func() time.Time { return now })
	ctx := t.Context()
	ages := []time.Duration{-time.Minute, 0, time.Minute, 5 * time.Minute, 5*time.Minute + time.Microsecond, 30 * time.Minute,
		time.Hour, 2 * time.Hour, 23 * time.Hour, 24 * time.Hour, 25 * time.Hour, 40 * time.Hour}
	var msgs []*quarantine.Message
	for i := range 48 {
		m := newMsg(withQueue([]string{"orders", "billing", "reports", "mail"}[i%4]), withOwner([]string{"team-a", "team-b"}[i/24]))
		m.CollectedAt = now.Add(-ages[i%len(ages)])
		m.FailedAt = m.CollectedAt.Add(-time.Duration(i%5) * time.Hour)
		if i%7 == 0 && i > 0 {
			m.FailedAt = msgs[len(msgs)-1].FailedAt // ties on failed_at
		}
		msgs = append(msgs, m)
	}
	insert(t, s, msgs...)
	var replayed, discarded, replaying []*quarantine.Message
	for i, m := range msgs {
		switch {
		case i%4 == 3:
			discarded = append(discarded, m) // every mail message: no quarantined one left there
		case i%5 == 1:
			replayed = append(replayed, m)
		case i%9 == 2:
			replaying = append(replaying, m)
		}
	}
	setStatus(t, h, s, quarantine.StatusDiscarded, discarded...)
	setStatus(t, h, s, quarantine.StatusReplayed, replayed...)
	setStatus(t, h, s, quarantine.StatusReplaying, replaying...)
	filters := []quarantine.Filter{
		{},
		{Queue: []string{"orders", "mail"}},
		{Owner: []string{"team-b"}},
		{Status: []quarantine.Status{quarantine.StatusQuarantined, quarantine.StatusReplayed}},
		// Statuses without quarantined: no oldest; the inflow whatever the status.
		{Status: []quarantine.Status{quarantine.StatusDiscarded}, Owner: []string{"team-a"}},
		{Status: []quarantine.Status{quarantine.StatusReplaying}, JobName: []string{"send_email"}},
		{JobName: []string{"send_email"}, Queue: []string{"billing"}},
		{FailedBefore: now.Add(-3 * time.Hour)},
		{Queue: []string{"nope"}},
	}
	for _, f := range filters {
		got, err := s.QueueStats(ctx, f, now)
		wantOK(t, err, "QueueStats")
		if want := expectedQueueStats(f, msgs, now); !sameQueueStats(got, want) {
			t.Fatalf("QueueStats(%+v) =\n%+v\nwant\n%+v", f, got, want)
		}
	}
	// The windows move with now.
	later := now.Add(30 * time.Minute)
	got, err := s.QueueStats(ctx, quarantine.Filter{}, later)
	wantOK(t, err, "QueueStats")
	if want := expectedQueueStats(quarantine.Filter{}, msgs, later); !sameQueueStats(got, want) {
		t.Fatalf("QueueStats later = %+v, want %+v", got, want)
	}
	_, err = s.QueueStats(ctx, quarantine.Filter{Status: []quarantine.Status{"x"}}, now)
	wantCode(t, err, quarantine.EINVALID)
}

func diffAt[T any](got, want []T, i int) string {
	var g, w any = "none", "none"
	if i < len(got) {
		g = got[i]
	}
	if i < len(want) {
		w = want[i]
	}
	return fmt.Sprintf("got  %+v\nwant %+v", g, w)
}

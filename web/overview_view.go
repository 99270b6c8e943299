package web

import (
	"cmp"
	"context"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/quarantine-dev/quarantine"
)

// overviewReads are the store reads the overview is drawn from.
type overviewReads struct {
	stats  []quarantine.QueueStats     // counts and oldest, by queue
	inflow []quarantine.QueueHistogram // per queue, over hourlyEdges
	ages   []quarantine.QueueHistogram // per queue, over ageEdges
	states []quarantine.AlarmState
	hist   quarantine.AgeHistory
}

// overviewView is the overview of the queues tok may see at now: the
// store reads (the queue counts first, then the charts' reads side by
// side), then the rows and charts drawn from them.
func (h *Handler) overviewView(ctx context.Context, tok *quarantine.Token, now time.Time) (*overviewContent, error) {
	var f quarantine.Filter
	scope(tok, &f)
	rd, err := h.overviewReads(ctx, f, now)
	if err != nil {
		return nil, err
	}
	c := &overviewContent{Now: now, Statuses: quarantine.Statuses}
	firing := map[string][]quarantine.AlarmState{}
	c.Alarms = visibleAlarms(rd.states, tok)
	for _, a := range c.Alarms {
		firing[a.Queue] = append(firing[a.Queue], a)
	}
	hourly := hourlyEdges(now)
	ages := newAgeTally()
	for i, st := range rd.stats {
		row := h.queueRow(st, now)
		row.Inflow = sparkline(rd.inflow[i].Counts, hourly)
		row.Firing = firing[st.Queue]
		c.Queues = append(c.Queues, row)
		c.Waiting += row.Waiting
		ages.add(row, rd.ages[i].Counts)
	}
	sortByUrgency(c.Queues, now)
	if err := h.countStraddled(ctx, ages, f.Owner, ageEdges(now), now); err != nil {
		return nil, err
	}
	c.Age, c.AgeRows = ageChart(ages.counts, ages.over)

	maxAges := make(map[string]time.Duration, len(c.Queues))
	for _, row := range c.Queues {
		maxAges[row.Queue] = row.MaxAge
	}
	c.History, c.HistRows = ageHistoryChart(rd.hist, now, func(q string) time.Duration {
		if m, ok := maxAges[q]; ok {
			return m
		}
		return h.maxAge(q, quarantine.AssignOwner(h.cfg.Owners, q))
	})
	return c, nil
}

// overviewReads reads the queues of f, then, side by side on their own
// connections, the waiting ones by age (the page's largest read: a range
// of the last day's quarantined messages of each queue) and the inflow,
// alarm states and age history.
func (h *Handler) overviewReads(ctx context.Context, f quarantine.Filter, now time.Time) (*overviewReads, error) {
	rd := &overviewReads{}
	var err error
	if rd.stats, err = h.queueStats(ctx, f, now); err != nil {
		return nil, err
	}
	queues := make([]string, len(rd.stats))
	for i, st := range rd.stats {
		queues[i] = st.Queue
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) {
		rd.ages, err = h.histograms(gctx, quarantine.HistogramWaiting, queues, f.Owner, ageEdges(now))
		return err
	})
	g.Go(func() (err error) {
		if rd.inflow, err = h.histograms(gctx, quarantine.HistogramInflow, queues, f.Owner, hourlyEdges(now)); err != nil {
			return err
		}
		if rd.states, err = h.cfg.Store.AlarmStates(gctx); err != nil {
			return err
		}
		rd.hist, err = h.cfg.Store.AgeHistory(gctx, historyRequest(now, f.Owner))
		return err
	})
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return rd, nil
}

// histograms is the store's histogram of kind over queues (any number:
// asked quarantine.MaxHistogramQueues at a time) by owners and edges.
func (h *Handler) histograms(ctx context.Context, kind quarantine.HistogramKind, queues, owners []string, edges []time.Time) ([]quarantine.QueueHistogram, error) {
	out := make([]quarantine.QueueHistogram, 0, len(queues))
	for lo := 0; lo < len(queues); lo += quarantine.MaxHistogramQueues {
		hs, err := h.cfg.Store.Histogram(ctx, quarantine.HistogramRequest{Kind: kind,
			Queues: queues[lo:min(lo+quarantine.MaxHistogramQueues, len(queues))], Owners: owners, Edges: edges})
		if err != nil {
			return nil, err
		}
		out = append(out, hs...)
	}
	return out, nil
}

// visibleAlarms are the firing and pending alarms of states on owners
// tok sees, firing first.
func visibleAlarms(states []quarantine.AlarmState, tok *quarantine.Token) []quarantine.AlarmState {
	var out []quarantine.AlarmState
	for _, a := range states {
		if (a.State == quarantine.AlarmFiring || a.State == quarantine.AlarmPending) && tok.Sees(a.Owner) {
			out = append(out, a)
		}
	}
	slices.SortStableFunc(out, func(a, b quarantine.AlarmState) int {
		if (a.State == quarantine.AlarmFiring) != (b.State == quarantine.AlarmFiring) {
			if a.State == quarantine.AlarmFiring {
				return -1
			}
			return 1
		}
		return 0
	})
	return out
}

// ageTally sums the age chart over the queues: per bucket of ageBuckets
// the dead letters waiting, and of them those past their queue's
// max_age; straddle holds, per max_age that falls inside a bucket of the
// last day, the queues whose part past it is still to count.
type ageTally struct {
	counts, over []int64
	straddle     map[time.Duration][]string
}

func newAgeTally() *ageTally {
	return &ageTally{counts: make([]int64, len(ageBuckets)), over: make([]int64, len(ageBuckets)),
		straddle: map[time.Duration][]string{}}
}

// add tallies row, whose waiting ones of the last day are lastDay (one
// count per bucket of ageEdges).
func (t *ageTally) add(row queueRow, lastDay []int64) {
	counts := make([]int64, len(ageBuckets))
	copy(counts[1:], lastDay)
	var day int64
	for _, n := range lastDay {
		day += n
	}
	// Older than a day: the rest of the kept count (read in another
	// snapshot, hence never below zero).
	counts[0] = max(row.Waiting-day, 0)
	for b, n := range counts {
		t.counts[b] += n
		switch bk := ageBuckets[b]; {
		case row.MaxAge == 0 || n == 0:
		case row.MaxAge <= bk.From:
			t.over[b] += n
		case bk.To == 0:
			// A max_age over a day splits the open bucket: counting the
			// part past it would walk everything older, so it is not
			// split (the queue's row shows its oldest age).
		case row.MaxAge < bk.To:
			t.straddle[row.MaxAge] = append(t.straddle[row.MaxAge], row.Queue)
		}
	}
}

// countStraddled adds to t.over, within each bucket that a max_age
// splits, exactly the part past it: ages in [max_age, To) are failed_at
// in (end-To, end-max_age], end the end of now's minute (ageEnd).
func (h *Handler) countStraddled(ctx context.Context, t *ageTally, owners []string, edges []time.Time, now time.Time) error {
	for maxAge, qs := range t.straddle {
		b := slices.IndexFunc(ageBuckets, func(bk ageBucket) bool {
			return maxAge > bk.From && bk.To != 0 && maxAge < bk.To
		})
		hs, err := h.histograms(ctx, quarantine.HistogramWaiting, qs, owners, []time.Time{edges[b-1], ageEnd(now).Add(-maxAge)})
		if err != nil {
			return err
		}
		for _, hq := range hs {
			t.over[b] += hq.Counts[0]
		}
	}
	return nil
}

// sortByUrgency orders the queue rows most urgent first: a firing alarm,
// then a pending one, then the oldest dead letter's level against its
// max_age (past it, over half of it, within it, nothing waiting), then
// the oldest age, then the most waiting, then the name.
func sortByUrgency(rows []queueRow, now time.Time) {
	alarmRank := func(r queueRow) int {
		rank := 2
		for _, a := range r.Firing {
			switch a.State {
			case quarantine.AlarmFiring:
				rank = 0
			case quarantine.AlarmPending:
				rank = min(rank, 1)
			}
		}
		return rank
	}
	levelRank := map[string]int{ageOver: 0, ageWarn: 1, ageOK: 2, ageNone: 3}
	age := func(r queueRow) time.Duration {
		if r.Oldest == nil {
			return -1
		}
		return now.Sub(*r.Oldest)
	}
	slices.SortStableFunc(rows, func(a, b queueRow) int {
		if c := cmp.Compare(alarmRank(a), alarmRank(b)); c != 0 {
			return c
		}
		if c := cmp.Compare(levelRank[a.AgeLevel], levelRank[b.AgeLevel]); c != 0 {
			return c
		}
		if c := cmp.Compare(age(b), age(a)); c != 0 {
			return c
		}
		if c := cmp.Compare(b.Waiting, a.Waiting); c != 0 {
			return c
		}
		return cmp.Compare(a.Queue, b.Queue)
	})
}

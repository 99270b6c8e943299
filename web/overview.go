package web

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// overviewRoutes registers the overview: per queue counts, ages against alarms, inflow and age charts.
func (h *Handler) overviewRoutes(m *http.ServeMux) {
	m.HandleFunc("GET /overview", h.authed(h.overview))
}

// Age levels of a queue's oldest quarantined message against the
// smallest max_age of its alarms.
const (
	ageNone = "none" // nothing waits
	ageOK   = "ok"   // under half of max_age, or no alarm
	ageWarn = "warn" // at least half of max_age
	ageOver = "over" // past max_age
)

// statusCell is one count of a queue row, with the messages link.
type statusCell struct {
	Status quarantine.Status
	N      int64
	URL    string
}

// queueRow is one queue of the overview.
type queueRow struct {
	Queue, Owner string
	URL          string // its messages
	Counts       []statusCell
	Waiting      int64
	Oldest       *time.Time
	OldestURL    string
	// MaxAge is the smallest max_age of the alarms covering the queue,
	// 0 when none does; Level is the oldest age against it.
	MaxAge   time.Duration
	MaxAgeS  string
	AgeLevel string
	Inflow   barChart
	Firing   []quarantine.AlarmState
}

type overviewContent struct {
	Now      time.Time
	Statuses []quarantine.Status
	Queues   []queueRow
	Alarms   []quarantine.AlarmState // firing or pending, on visible queues
	Age      barChart
	AgeRows  []ageRow
	History  lineChart
	HistRows []historyRow
	Waiting  int64
}

// overview is GET /overview: every queue the token may see.
func (h *Handler) overview(w http.ResponseWriter, r *http.Request, s *session) {
	ctx := r.Context()
	now := h.cfg.Now().UTC()
	var f quarantine.Filter
	scope(s.token, &f)
	stats, err := h.queueStats(ctx, f, now)
	if err != nil {
		h.fail(w, r, s, err)
		return
	}
	c := overviewContent{Now: now, Statuses: quarantine.Statuses}
	queues := make([]string, len(stats))
	for i, st := range stats {
		queues[i] = st.Queue
	}
	hourly := hourlyEdges(now)
	edges := ageEdges(now)
	// The waiting ones by age are the page's largest read (a range of the
	// last day's quarantined messages of each queue): it runs alongside
	// the other reads, on its own connection.
	var ages []quarantine.QueueHistogram
	var agesErr error
	agesDone := make(chan struct{})
	go func() {
		defer close(agesDone)
		for lo := 0; lo < len(queues); lo += quarantine.MaxHistogramQueues {
			ag, err := h.cfg.Store.Histogram(ctx, quarantine.HistogramRequest{Kind: quarantine.HistogramWaiting,
				Queues: queues[lo:min(lo+quarantine.MaxHistogramQueues, len(queues))], Owners: f.Owner, Edges: edges})
			if err != nil {
				agesErr = err
				return
			}
			ages = append(ages, ag...)
		}
	}()
	defer func() { <-agesDone }()
	var inflow []quarantine.QueueHistogram
	for lo := 0; lo < len(queues); lo += quarantine.MaxHistogramQueues {
		in, err := h.cfg.Store.Histogram(ctx, quarantine.HistogramRequest{Kind: quarantine.HistogramInflow,
			Queues: queues[lo:min(lo+quarantine.MaxHistogramQueues, len(queues))], Owners: f.Owner, Edges: hourly})
		if err != nil {
			h.fail(w, r, s, err)
			return
		}
		inflow = append(inflow, in...)
	}
	states, err := h.cfg.Store.AlarmStates(ctx)
	if err != nil {
		h.fail(w, r, s, err)
		return
	}
	hist, err := h.cfg.Store.AgeHistory(ctx, historyRequest(now, f.Owner))
	if err != nil {
		h.fail(w, r, s, err)
		return
	}
	if <-agesDone; agesErr != nil {
		h.fail(w, r, s, agesErr)
		return
	}
	firing := map[string][]quarantine.AlarmState{}
	for _, a := range states {
		if (a.State != quarantine.AlarmFiring && a.State != quarantine.AlarmPending) || !s.token.Sees(a.Owner) {
			continue
		}
		c.Alarms = append(c.Alarms, a)
		firing[a.Queue] = append(firing[a.Queue], a)
	}
	slices.SortStableFunc(c.Alarms, func(a, b quarantine.AlarmState) int {
		if (a.State == quarantine.AlarmFiring) != (b.State == quarantine.AlarmFiring) {
			if a.State == quarantine.AlarmFiring {
				return -1
			}
			return 1
		}
		return 0
	})

	ageCounts := make([]int64, len(ageBuckets))
	over := make([]int64, len(ageBuckets))
	straddle := map[time.Duration][]string{} // max_age -> queues whose max_age falls inside a bucket of the last day
	for i, st := range stats {
		row := h.queueRow(st, now)
		row.Inflow = sparkline(inflow[i].Counts, hourly)
		row.Firing = firing[st.Queue]
		c.Queues = append(c.Queues, row)
		c.Waiting += row.Waiting
		counts := make([]int64, len(ageBuckets))
		copy(counts[1:], ages[i].Counts)
		var lastDay int64
		for _, n := range ages[i].Counts {
			lastDay += n
		}
		// Older than a day: the rest of the kept count (read in another
		// snapshot, hence never below zero).
		counts[0] = max(row.Waiting-lastDay, 0)
		for b, n := range counts {
			ageCounts[b] += n
			switch bk := ageBuckets[b]; {
			case row.MaxAge == 0 || n == 0:
			case row.MaxAge <= bk.From:
				over[b] += n
			case bk.To == 0:
				// A max_age over a day splits the open bucket: counting
				// the part past it would walk everything older, so it
				// is not split (the queue's row shows its oldest age).
			case row.MaxAge < bk.To:
				straddle[row.MaxAge] = append(straddle[row.MaxAge], st.Queue)
			}
		}
	}
	// Within a bucket that a max_age splits, count exactly the part past
	// it: ages in [max_age, To) are failed_at in (now-To, now-max_age].
	for maxAge, qs := range straddle {
		b := slices.IndexFunc(ageBuckets, func(bk ageBucket) bool {
			return maxAge > bk.From && bk.To != 0 && maxAge < bk.To
		})
		for lo := 0; lo < len(qs); lo += quarantine.MaxHistogramQueues {
			hs, err := h.cfg.Store.Histogram(ctx, quarantine.HistogramRequest{Kind: quarantine.HistogramWaiting,
				Queues: qs[lo:min(lo+quarantine.MaxHistogramQueues, len(qs))], Owners: f.Owner,
				Edges: []time.Time{edges[b-1], now.Add(-maxAge)}})
			if err != nil {
				h.fail(w, r, s, err)
				return
			}
			for _, hq := range hs {
				over[b] += hq.Counts[0]
			}
		}
	}
	c.Age, c.AgeRows = ageChart(ageCounts, over)

	maxAges := make(map[string]time.Duration, len(c.Queues))
	for _, row := range c.Queues {
		maxAges[row.Queue] = row.MaxAge
	}
	c.History, c.HistRows = ageHistoryChart(hist, now, func(q string) time.Duration {
		if m, ok := maxAges[q]; ok {
			return m
		}
		return h.maxAge(q, quarantine.AssignOwner(h.cfg.Owners, q))
	})
	h.render(w, r, http.StatusOK, "overview", page{Title: "Overview", Token: s.token, CSRF: s.csrf, Content: &c})
}

// queueStats returns the counts by status and the oldest quarantined
// message of each queue of f. Unscoped, they are the store's kept counts
// and one probe per queue (CountByQueue, OldestQuarantined), which is
// what QueueStats does too, without its inflow counts: the overview
// counts the inflow by the hour. A scoped token's oldest message must be
// one of its owners': QueueStats finds it.
func (h *Handler) queueStats(ctx context.Context, f quarantine.Filter, now time.Time) ([]quarantine.QueueStats, error) {
	if len(f.Owner) > 0 {
		return h.cfg.Store.QueueStats(ctx, f, now)
	}
	counts, err := h.cfg.Store.CountByQueue(ctx, f)
	if err != nil {
		return nil, err
	}
	oldest, err := h.cfg.Store.OldestQuarantined(ctx)
	if err != nil {
		return nil, err
	}
	byQueue := make(map[string]quarantine.QueueOldest, len(oldest))
	for _, o := range oldest {
		byQueue[o.Queue] = o
	}
	var out []quarantine.QueueStats
	for _, c := range counts {
		if len(out) == 0 || out[len(out)-1].Queue != c.Queue {
			st := quarantine.QueueStats{Queue: c.Queue, Counts: map[quarantine.Status]int64{}}
			if o, ok := byQueue[c.Queue]; ok {
				at := o.FailedAt
				st.OldestQuarantinedAt, st.OldestID = &at, o.MessageID
			}
			out = append(out, st)
		}
		out[len(out)-1].Counts[c.Status] += c.Count
	}
	return out, nil
}

// queueRow is st as the overview shows it.
func (h *Handler) queueRow(st quarantine.QueueStats, now time.Time) queueRow {
	owner := st.Owner
	if owner == "" {
		owner = quarantine.AssignOwner(h.cfg.Owners, st.Queue)
	}
	row := queueRow{Queue: st.Queue, Owner: owner, Waiting: st.Counts[quarantine.StatusQuarantined],
		URL: "/messages?" + url.Values{"queue": {st.Queue}}.Encode(), AgeLevel: ageNone}
	for _, status := range quarantine.Statuses {
		row.Counts = append(row.Counts, statusCell{Status: status, N: st.Counts[status],
			URL: "/messages?" + url.Values{"queue": {st.Queue}, "status": {string(status)}}.Encode()})
	}
	row.MaxAge = h.maxAge(st.Queue, owner)
	if row.MaxAge > 0 {
		row.MaxAgeS = row.MaxAge.String()
	}
	if st.OldestQuarantinedAt != nil {
		row.Oldest = st.OldestQuarantinedAt
		row.OldestURL = "/messages/" + st.OldestID
		age := now.Sub(*st.OldestQuarantinedAt)
		switch {
		case row.MaxAge > 0 && age > row.MaxAge:
			row.AgeLevel = ageOver
		case row.MaxAge > 0 && age >= row.MaxAge/2:
			row.AgeLevel = ageWarn
		default:
			row.AgeLevel = ageOK
		}
	}
	return row
}

// maxAge is the smallest max_age of the alarms covering queue (of
// owner), 0 when none does.
func (h *Handler) maxAge(queue, owner string) time.Duration {
	var m time.Duration
	for i := range h.cfg.Alarms {
		if a := &h.cfg.Alarms[i]; a.Matches(queue, owner) && (m == 0 || a.MaxAge < m) {
			m = a.MaxAge
		}
	}
	return m
}

// Package queuestats holds what both stores do alike around their SQL
// when they compute the queues' stats (store.Store's QueueStats): a
// queue's zero stats, and the aggregation of a scan of the messages
// grouped by queue and status.
package queuestats

import (
	"slices"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// New returns the stats of queue q with every status at zero.
func New(q string) quarantine.QueueStats {
	st := quarantine.QueueStats{Queue: q, Counts: make(map[quarantine.Status]int64, len(quarantine.Statuses))}
	for _, s := range quarantine.Statuses {
		st.Counts[s] = 0
	}
	return st
}

// Scan aggregates the rows of a scan of the messages matching a filter
// but its statuses, grouped by queue then status, in queue order: the
// queues and counts are those of the filter's statuses, the inflow every
// status's.
type Scan struct {
	statuses []quarantine.Status // the filter's (none: every status)
	out      []quarantine.QueueStats
	matched  []bool // whether out[i] has messages in statuses
}

// NewScan starts the scan of a filter with statuses (none: every status).
func NewScan(statuses []quarantine.Status) *Scan {
	return &Scan{statuses: statuses, out: []quarantine.QueueStats{}}
}

// Row is one row of a scan: the messages of one queue in one status.
type Row struct {
	Queue  string
	Status quarantine.Status
	Count  int64
	// OldestAt and OldestID are the oldest quarantined message's failure
	// time and id (nil when there is none).
	OldestAt *time.Time
	OldestID *string
	// In5m, In1h and In24h count the messages collected within the
	// inflow windows (hours.InflowWindows).
	In5m, In1h, In24h int64
}

// Add adds row r.
func (a *Scan) Add(r Row) {
	if len(a.out) == 0 || a.out[len(a.out)-1].Queue != r.Queue {
		a.out, a.matched = append(a.out, New(r.Queue)), append(a.matched, false)
	}
	st := &a.out[len(a.out)-1]
	st.Inflow5m += r.In5m
	st.Inflow1h += r.In1h
	st.Inflow24h += r.In24h
	if len(a.statuses) > 0 && !slices.Contains(a.statuses, r.Status) {
		return
	}
	a.matched[len(a.matched)-1] = true
	st.Counts[r.Status] = r.Count
	if r.OldestAt != nil && r.OldestID != nil {
		at := r.OldestAt.UTC()
		st.OldestQuarantinedAt, st.OldestID = &at, *r.OldestID
	}
}

// Stats returns the stats of the queues that have messages in the
// filter's statuses, in queue order.
func (a *Scan) Stats() []quarantine.QueueStats {
	kept := a.out[:0]
	for i, st := range a.out {
		if a.matched[i] {
			kept = append(kept, st)
		}
	}
	return kept
}

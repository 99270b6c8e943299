package alert

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store"
)

// RegisterGauges registers, read from the store at each scrape (within
// 2 s; nothing is reported when the store does not answer):
//
//	quarantine_messages{queue,owner,status}                messages by status
//	quarantine_oldest_message_age_seconds{queue,owner}     age of the oldest quarantined one (0: none)
//	quarantine_alarm_firing{alarm,queue,owner}             1 while the alarm fires, else 0
//	quarantine_search_index_lag_seconds                    how long the oldest message waiting
//	                                                       for the text search index has waited
//
// The first two come from QueueStats (index-backed: the cost grows with
// the number of queues, not of messages); owner is the owner rules'
// (owner may be nil); now is the clock (default time.Now).
func RegisterGauges(reg prometheus.Registerer, st GaugeStore, owner func(queue string) string, now func() time.Time) {
	if owner == nil {
		owner = func(string) string { return "" }
	}
	if now == nil {
		now = time.Now
	}
	reg.MustRegister(&gauges{st: st, owner: owner, now: now,
		messages: prometheus.NewDesc("quarantine_messages", "Messages in the quarantine by queue, owner and status.",
			[]string{"queue", "owner", "status"}, nil),
		oldest: prometheus.NewDesc("quarantine_oldest_message_age_seconds",
			"Age of the oldest quarantined message of the queue, by when it was dead-lettered (0 when none waits).",
			[]string{"queue", "owner"}, nil),
		firing: prometheus.NewDesc("quarantine_alarm_firing", "1 while the alarm fires on the queue, else 0.",
			[]string{"alarm", "queue", "owner"}, nil),
		searchLag: prometheus.NewDesc("quarantine_search_index_lag_seconds",
			"How long the oldest message waiting for the text search index has waited (0: every message is searchable).", nil, nil),
	})
}

type gauges struct {
	st                       GaugeStore
	owner                    func(string) string
	now                      func() time.Time
	messages, oldest, firing *prometheus.Desc
	searchLag                *prometheus.Desc
}

// GaugeStore is what the gauges read: the evaluator's Store and the lag
// of the search index.
type GaugeStore interface {
	Store
	store.Search
}

var _ GaugeStore = store.Store(nil)

func (g *gauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- g.messages
	ch <- g.oldest
	ch <- g.firing
	ch <- g.searchLag
}

func (g *gauges) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	now := g.now()
	if stats, err := g.st.QueueStats(ctx, quarantine.Filter{}, now); err == nil {
		for _, qs := range stats {
			o := g.owner(qs.Queue)
			for _, s := range quarantine.Statuses {
				ch <- prometheus.MustNewConstMetric(g.messages, prometheus.GaugeValue, float64(qs.Counts[s]), qs.Queue, o, string(s))
			}
			age := 0.0
			if qs.OldestQuarantinedAt != nil && now.After(*qs.OldestQuarantinedAt) {
				age = now.Sub(*qs.OldestQuarantinedAt).Seconds()
			}
			ch <- prometheus.MustNewConstMetric(g.oldest, prometheus.GaugeValue, age, qs.Queue, o)
		}
	}
	if states, err := g.st.AlarmStates(ctx); err == nil {
		for _, a := range states {
			v := 0.0
			if a.State == quarantine.AlarmFiring {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(g.firing, prometheus.GaugeValue, v, a.Alarm, a.Queue, a.Owner)
		}
	}
	if lag, err := g.st.SearchLag(ctx); err == nil {
		ch <- prometheus.MustNewConstMetric(g.searchLag, prometheus.GaugeValue, lag.Seconds())
	}
}

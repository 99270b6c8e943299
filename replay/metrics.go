package replay

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quarantine-dev/quarantine"
)

// Metrics are the engine's Prometheus metrics. Labels are bounded: the
// destination queue and the outcome, never a message or batch id. A nil
// *Metrics records nothing.
type Metrics struct {
	published *prometheus.CounterVec
	took      prometheus.Histogram
	halts     prometheus.Counter
	breakers  prometheus.Counter
	late      prometheus.Counter
}

// NewMetrics registers the engine's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quarantine_replay_published_total",
			Help: "Replay items by destination queue and outcome (published, deduplicated, failed, skipped; retry: not taken now, tried again; stale: a result refused because the lease was lost).",
		}, []string{"queue", "outcome"}),
		took: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "quarantine_replay_publish_seconds",
			Help:    "Time a destination took to confirm one chunk of replayed messages.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 9),
		}),
		halts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "quarantine_replay_canary_halts_total",
			Help: "Batches halted because a canary message came back failing.",
		}),
		breakers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "quarantine_replay_breaker_pauses_total",
			Help: "Batches paused because their re-failure ratio passed the threshold.",
		}),
		late: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "quarantine_replay_late_total",
			Help: "Replay items not published within the lateness allowed after their slot of the rate's schedule (a slow moment), given a new slot: each lost a slot of the rate.",
		}),
	}
	reg.MustRegister(m.published, m.took, m.halts, m.breakers, m.late)
	return m
}

func (m *Metrics) outcome(queue, outcome string) {
	if m != nil {
		m.published.WithLabelValues(queue, outcome).Inc()
	}
}

func (m *Metrics) publishTook(d time.Duration) {
	if m != nil {
		m.took.Observe(d.Seconds())
	}
}

func (m *Metrics) halt() {
	if m != nil {
		m.halts.Inc()
	}
}

func (m *Metrics) breaker() {
	if m != nil {
		m.breakers.Inc()
	}
}

// BatchCounter counts batches by state (store.Replays has it).
type BatchCounter interface {
	CountReplays(ctx context.Context) (map[quarantine.ReplayState]int, error)
}

// RegisterBatchGauge registers quarantine_replay_batches{state}, read
// from the store at each scrape (within 2 s; nothing is reported when the
// store does not answer).
func RegisterBatchGauge(reg prometheus.Registerer, st BatchCounter) {
	reg.MustRegister(&batchCollector{st: st, desc: prometheus.NewDesc("quarantine_replay_batches",
		"Replay batches by state.", []string{"state"}, nil)})
}

type batchCollector struct {
	st   BatchCounter
	desc *prometheus.Desc
}

func (c *batchCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *batchCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	counts, err := c.st.CountReplays(ctx)
	if err != nil {
		return
	}
	for _, s := range quarantine.ReplayStates {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(counts[s]), string(s))
	}
}

func (m *Metrics) lateItems(n int) {
	if m != nil && n > 0 {
		m.late.Add(float64(n))
	}
}

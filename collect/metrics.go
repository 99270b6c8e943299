package collect

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the collectors' Prometheus metrics, labelled by collector.
// A nil *Metrics records nothing.
type Metrics struct {
	receivedC   *prometheus.CounterVec
	storedC     *prometheus.CounterVec
	duplicatesC *prometheus.CounterVec
	errorsC     *prometheus.CounterVec
	batchH      *prometheus.HistogramVec
	lastBatchG  *prometheus.GaugeVec

	// By source (the collector) and queue, as the alarms' and
	// dashboards' names: ingested, duplicates, last success.
	ingestedC    *prometheus.CounterVec
	ingestDupsC  *prometheus.CounterVec
	lastSuccessG *prometheus.GaugeVec

	mu     sync.Mutex
	queues map[string]map[string]bool // per source, the queue labels given out
}

// MaxQueueLabels caps the distinct queue labels per collector: queue names
// come from the messages (an envelope may name any), so past the cap they
// are counted under OtherQueue.
const (
	MaxQueueLabels = 500
	OtherQueue     = "_other"
)

// NewMetrics registers the collector metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		receivedC: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quarantine_collector_received_total", Help: "Broker messages received by the collector.",
		}, []string{"collector"}),
		storedC: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quarantine_collector_stored_total", Help: "Messages stored as new entries.",
		}, []string{"collector"}),
		duplicatesC: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quarantine_collector_duplicates_total", Help: "Redelivered messages already stored (deduplicated).",
		}, []string{"collector"}),
		errorsC: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quarantine_collector_errors_total", Help: "Collector errors by kind (receive, store, ack).",
		}, []string{"collector", "kind"}),
		batchH: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "quarantine_collector_batch_seconds", Help: "Time to commit one batch to the store.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
		}, []string{"collector"}),
		lastBatchG: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "quarantine_collector_last_batch_timestamp_seconds", Help: "Unix time of the last committed batch.",
		}, []string{"collector"}),
	}
	m.ingestedC = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "quarantine_ingested_total", Help: "Messages stored as new entries, by collector (source) and queue.",
	}, []string{"source", "queue"})
	m.ingestDupsC = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "quarantine_ingest_duplicates_total", Help: "Redelivered messages already stored, by collector (source).",
	}, []string{"source"})
	m.lastSuccessG = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "quarantine_collector_last_success_timestamp_seconds", Help: "Unix time of the collector's last committed batch.",
	}, []string{"source"})
	m.queues = map[string]map[string]bool{}
	reg.MustRegister(m.receivedC, m.storedC, m.duplicatesC, m.errorsC, m.batchH, m.lastBatchG,
		m.ingestedC, m.ingestDupsC, m.lastSuccessG)
	return m
}

// queueLabel returns queue, or OtherQueue once source has MaxQueueLabels.
func (m *Metrics) queueLabel(source, queue string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	qs := m.queues[source]
	if qs == nil {
		qs = map[string]bool{}
		m.queues[source] = qs
	}
	if qs[queue] {
		return queue
	}
	if len(qs) >= MaxQueueLabels {
		return OtherQueue
	}
	qs[queue] = true
	return queue
}

// ingested counts the new entries of a batch by queue.
func (m *Metrics) ingested(name string, queues map[string]int) {
	if m == nil {
		return
	}
	for q, n := range queues {
		m.ingestedC.WithLabelValues(name, m.queueLabel(name, q)).Add(float64(n))
	}
}

// start makes the counters of collector name exist at zero, so that a
// rate() or an alert on them works before the first batch or error.
func (m *Metrics) start(name string) {
	if m == nil {
		return
	}
	m.receivedC.WithLabelValues(name)
	m.storedC.WithLabelValues(name)
	m.duplicatesC.WithLabelValues(name)
	m.ingestDupsC.WithLabelValues(name)
	for _, kind := range []string{ErrReceive, ErrStore, ErrAck} {
		m.errorsC.WithLabelValues(name, kind)
	}
}

func (m *Metrics) received(name string, n int) {
	if m != nil {
		m.receivedC.WithLabelValues(name).Add(float64(n))
	}
}

func (m *Metrics) batch(name string, stored, dups int, took time.Duration, at time.Time) {
	if m == nil {
		return
	}
	m.storedC.WithLabelValues(name).Add(float64(stored))
	m.duplicatesC.WithLabelValues(name).Add(float64(dups))
	m.batchH.WithLabelValues(name).Observe(took.Seconds())
	m.lastBatchG.WithLabelValues(name).Set(float64(at.UnixNano()) / 1e9)
	m.ingestDupsC.WithLabelValues(name).Add(float64(dups))
	m.lastSuccessG.WithLabelValues(name).Set(float64(at.UnixNano()) / 1e9)
}

func (m *Metrics) failed(name, kind string) {
	if m != nil {
		m.errorsC.WithLabelValues(name, kind).Inc()
	}
}

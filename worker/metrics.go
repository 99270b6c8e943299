package worker

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the worker's Prometheus metrics. Labels are bounded: job is
// a registered job name (or "unknown"), class a failure or retry class
// from a fixed list; never a job id or key.
//
//	quarantine_worker_completions_total{job}
//	quarantine_worker_retries_total{job,class}       class: error, retry_after, timeout, panic, shutdown, unknown_name, claim_held, claim_error, record_error, claim_lost, deferred
//	quarantine_worker_redeliveries_total{job}        deliveries with attempt > 1
//	quarantine_worker_dead_letters_total{job,class}  class: permanent, exhausted, unknown_name, malformed
//	quarantine_worker_rejections_total{job}
//	quarantine_worker_claim_conflicts_total{job}     duplicates of a completed key, acked without running
//	quarantine_worker_handler_seconds{job}           handler latency
//	quarantine_worker_delivery_age_seconds{job}      age of a delivery when received (since it was first enqueued)
//	quarantine_worker_settlement_failures_total{job,result}  settlements the backend did not accept (left to redelivery)
//	quarantine_worker_abandoned_total{job}           deliveries still running at the drain deadline, left unacknowledged
type Metrics struct {
	completions  *prometheus.CounterVec
	retries      *prometheus.CounterVec
	redeliveries *prometheus.CounterVec
	deadLetters  *prometheus.CounterVec
	rejections   *prometheus.CounterVec
	conflicts    *prometheus.CounterVec
	latency      *prometheus.HistogramVec
	age          *prometheus.HistogramVec
	settleFails  *prometheus.CounterVec
	abandoned    *prometheus.CounterVec
}

// NewMetrics creates the worker metrics and registers them with reg (not
// registered when reg is nil). It panics, as prometheus.MustRegister does,
// when they are registered twice with one registry.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		completions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quarantine_worker_completions_total", Help: "Jobs completed and acknowledged."}, []string{"job"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quarantine_worker_retries_total", Help: "Deliveries settled for a later retry, by class."}, []string{"job", "class"}),
		redeliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quarantine_worker_redeliveries_total", Help: "Deliveries whose attempt is above 1."}, []string{"job"}),
		deadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quarantine_worker_dead_letters_total", Help: "Deliveries dead-lettered with a failure envelope, by class."}, []string{"job", "class"}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quarantine_worker_rejections_total", Help: "Deliveries rejected to the backend's policy."}, []string{"job"}),
		conflicts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quarantine_worker_claim_conflicts_total", Help: "Duplicate deliveries of a completed idempotency key, acknowledged without running."}, []string{"job"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "quarantine_worker_handler_seconds", Help: "Handler run time.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}, []string{"job"}),
		age: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "quarantine_worker_delivery_age_seconds", Help: "Age of a delivery when received: time since the job was first enqueued.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 12)}, []string{"job"}),
		settleFails: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quarantine_worker_settlement_failures_total", Help: "Settlements the backend did not accept, by intended result; the delivery is left to redelivery."}, []string{"job", "result"}),
		abandoned: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quarantine_worker_abandoned_total", Help: "Deliveries still running at the drain deadline, left unacknowledged for the backend to redeliver."}, []string{"job"}),
	}
	if reg != nil {
		reg.MustRegister(m.completions, m.retries, m.redeliveries, m.deadLetters, m.rejections, m.conflicts, m.latency,
			m.age, m.settleFails, m.abandoned)
	}
	return m
}

func (m *Metrics) observe(o Outcome) {
	if m == nil {
		return
	}
	switch o.Result {
	case Completed:
		m.completions.WithLabelValues(o.jobLabel).Inc()
	case Duplicate:
		m.conflicts.WithLabelValues(o.jobLabel).Inc()
	case Retried:
		m.retries.WithLabelValues(o.jobLabel, o.Class).Inc()
	case DeadLettered:
		m.deadLetters.WithLabelValues(o.jobLabel, o.Class).Inc()
	case Rejected:
		m.rejections.WithLabelValues(o.jobLabel).Inc()
	}
}

func (m *Metrics) redelivered(job string) {
	if m != nil {
		m.redeliveries.WithLabelValues(job).Inc()
	}
}

// received observes the age of d at now: since EnqueuedAt, else
// HeaderEnqueuedAt; nothing when neither is known.
func (m *Metrics) received(job string, now time.Time, d *Delivery) {
	if m == nil {
		return
	}
	t := d.EnqueuedAt
	if t.IsZero() {
		t, _ = time.Parse(time.RFC3339Nano, d.Header(HeaderEnqueuedAt))
	}
	if !t.IsZero() {
		m.age.WithLabelValues(job).Observe(max(now.Sub(t), 0).Seconds())
	}
}

func (m *Metrics) settleFailed(job string, r Result) {
	if m != nil {
		m.settleFails.WithLabelValues(job, r.String()).Inc()
	}
}

func (m *Metrics) abandon(job string) {
	if m != nil {
		m.abandoned.WithLabelValues(job).Inc()
	}
}

func (m *Metrics) ran(job string, d time.Duration) {
	if m != nil {
		m.latency.WithLabelValues(job).Observe(d.Seconds())
	}
}

// Completions returns the completions counter of job (for tests and
// dashboards built in code).
func (m *Metrics) Completions(job string) prometheus.Counter {
	return m.completions.WithLabelValues(job)
}

// Conflicts returns the claim conflicts counter of job.
func (m *Metrics) Conflicts(job string) prometheus.Counter {
	return m.conflicts.WithLabelValues(job)
}

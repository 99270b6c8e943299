package api

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the API's Prometheus metrics. Routes are labelled by their
// pattern ("unmatched" for unknown paths), so label values stay few.
type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	ingested *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quarantine_http_requests_total",
			Help: "HTTP requests served, by method, route pattern and status.",
		}, []string{"method", "route", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "quarantine_http_request_duration_seconds",
			Help:    "Time to serve HTTP requests, by method and route pattern.",
			Buckets: prometheus.DefBuckets,
		}, []string{"method", "route"}),
		ingested: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quarantine_ingest_messages_total",
			Help: "Envelopes received on POST /api/v1/ingest, by result (stored, duplicate) and failure class.",
		}, []string{"result", "failure_class"}),
	}
	reg.MustRegister(m.requests, m.duration, m.ingested)
	return m
}

func (m *metrics) observe(method, route string, status int, d time.Duration) {
	switch method {
	case "GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS":
	default:
		method = "other"
	}
	m.requests.WithLabelValues(method, route, strconv.Itoa(status)).Inc()
	m.duration.WithLabelValues(method, route).Observe(d.Seconds())
}

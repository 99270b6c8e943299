package worker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/quarantine-dev/quarantine/broker/memory"
	"github.com/quarantine-dev/quarantine/worker"
)

// The age of a delivery at receipt is observed from when the job was
// first enqueued (injected clock: exactly 10 minutes).
func TestMetricsDeliveryAge(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	e := newEnv(t, withConfig(func(c *worker.Config) { c.Metrics = worker.NewMetrics(reg) }))
	e.start(e.effectJob("j", 1))
	e.q.Put(memory.Job{ID: "m1", EnqueuedAt: e.clk.Now().Add(-10 * time.Minute),
		Headers: map[string]string{worker.HeaderJobName: "j", worker.HeaderIdempotencyKey: "k1"}, Body: []byte("{}")})
	e.expect(worker.Completed, "")
	want := `
# HELP quarantine_worker_delivery_age_seconds Age of a delivery when received: time since the job was first enqueued.
# TYPE quarantine_worker_delivery_age_seconds histogram
quarantine_worker_delivery_age_seconds_bucket{job="j",le="0.01"} 0
quarantine_worker_delivery_age_seconds_bucket{job="j",le="0.04"} 0
quarantine_worker_delivery_age_seconds_bucket{job="j",le="0.16"} 0
quarantine_worker_delivery_age_seconds_bucket{job="j",le="0.64"} 0
quarantine_worker_delivery_age_seconds_bucket{job="j",le="2.56"} 0
quarantine_worker_delivery_age_seconds_bucket{job="j",le="10.24"} 0
quarantine_worker_delivery_age_seconds_bucket{job="j",le="40.96"} 0
quarantine_worker_delivery_age_seconds_bucket{job="j",le="163.84"} 0
quarantine_worker_delivery_age_seconds_bucket{job="j",le="655.36"} 1
quarantine_worker_delivery_age_seconds_bucket{job="j",le="2621.44"} 1
quarantine_worker_delivery_age_seconds_bucket{job="j",le="10485.76"} 1
quarantine_worker_delivery_age_seconds_bucket{job="j",le="41943.04"} 1
quarantine_worker_delivery_age_seconds_bucket{job="j",le="+Inf"} 1
quarantine_worker_delivery_age_seconds_sum{job="j"} 600
quarantine_worker_delivery_age_seconds_count{job="j"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "quarantine_worker_delivery_age_seconds"); err != nil {
		t.Fatal(err)
	}
}

// A settlement the backend refuses is counted by intended result (and
// reported as no outcome).
func TestMetricsSettlementFailures(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	e := newEnv(t, withConfig(func(c *worker.Config) { c.Metrics = worker.NewMetrics(reg) }))
	e.drv.failAck.Store(true)
	e.start(e.effectJob("j", 3))
	e.put("m1", "j", "k1", "{}")
	e.idle()
	e.quiet(20 * time.Millisecond)
	want := `
# HELP quarantine_worker_settlement_failures_total Settlements the backend did not accept, by intended result; the delivery is left to redelivery.
# TYPE quarantine_worker_settlement_failures_total counter
quarantine_worker_settlement_failures_total{job="j",result="completed"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "quarantine_worker_settlement_failures_total"); err != nil {
		t.Fatal(err)
	}
}

// A handler still running at the drain deadline is abandoned, and
// counted.
func TestMetricsAbandonedAtTheDrainDeadline(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	e := newEnv(t, withConfig(func(c *worker.Config) {
		c.Metrics = worker.NewMetrics(reg)
		c.DrainTimeout, c.SettleTimeout = 10*time.Millisecond, 50*time.Millisecond
	}))
	started, release := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(release) })
	stop := e.start(worker.Job{Name: "j", Queue: "work", Handler: func(context.Context, *worker.Job, *worker.Delivery) error {
		close(started)
		<-release // ignores its context
		return nil
	}})
	e.put("m1", "j", "k1", "{}")
	<-started
	if err := stop(); err == nil {
		t.Fatal("Run returned nil, want the abandoned delivery reported")
	}
	want := `
# HELP quarantine_worker_abandoned_total Deliveries still running at the drain deadline, left unacknowledged for the backend to redeliver.
# TYPE quarantine_worker_abandoned_total counter
quarantine_worker_abandoned_total{job="j"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "quarantine_worker_abandoned_total"); err != nil {
		t.Fatal(err)
	}
}

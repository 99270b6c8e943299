package collect_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/quarantine-dev/quarantine/collect"
)

// A collector's counters exist at zero from its creation, before any
// batch or error, so that rate() and alerts on them work from the start.
func TestMetricsPresentAtZero(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	collect.New(collect.Config{Name: "orders", Metrics: collect.NewMetrics(reg)})
	want := `
# HELP quarantine_collector_errors_total Collector errors by kind (receive, store, ack).
# TYPE quarantine_collector_errors_total counter
quarantine_collector_errors_total{collector="orders",kind="ack"} 0
quarantine_collector_errors_total{collector="orders",kind="receive"} 0
quarantine_collector_errors_total{collector="orders",kind="store"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "quarantine_collector_errors_total"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(reg, "quarantine_collector_received_total", "quarantine_collector_stored_total",
		"quarantine_collector_duplicates_total"); n != 3 {
		t.Fatalf("%d of the received/stored/duplicates series exist, want 3", n)
	}
}

// After a drain, quarantine_ingested_total counts the new entries by
// source and queue, and the duplicates and last success are set.
func TestMetricsIngestedBySourceAndQueue(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	st := openStore(t)
	src := newMemSource(300)
	_, stop := start(t, collect.Config{Name: "mem", Source: src, Store: st, BatchSize: 64, Preparer: &collect.Preparer{},
		Metrics: collect.NewMetrics(reg)})
	waitFor(t, "all acked", func() bool { _, _, a := src.state(); return a == 300 })
	stop()
	total := 0.0
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, mf := range mfs {
		seen[mf.GetName()] = true
		if mf.GetName() != "quarantine_ingested_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["source"] != "mem" || labels["queue"] == "" {
				t.Errorf("labels %v", labels)
			}
			total += m.GetCounter().GetValue()
		}
	}
	if total != 300 {
		t.Fatalf("quarantine_ingested_total sums to %v, want 300", total)
	}
	for _, name := range []string{"quarantine_ingest_duplicates_total", "quarantine_collector_last_success_timestamp_seconds"} {
		if !seen[name] {
			t.Errorf("%s missing", name)
		}
	}
}

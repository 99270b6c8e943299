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

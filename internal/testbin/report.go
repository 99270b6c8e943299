package testbin

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine/internal/pgtest"
)

// EnvList returns the comma-separated list in the variable name, or def.
func EnvList(name string, def ...string) []string {
	v := strings.TrimSpace(os.Getenv(name))
	if v == "" {
		return def
	}
	return strings.Split(v, ",")
}

// Median returns the median of xs (0 for none). One slow or fast round,
// common on a shared machine, then moves nothing.
func Median(xs []float64) float64 {
	s := slices.Clone(xs)
	if len(s) == 0 {
		return 0
	}
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Drained is what one drain of a binary-versus-bare benchmark measured
// over its rounds: its rate in each round and the CPU the broker, the
// database and the drainer itself used in all.
type Drained struct {
	Kind, Name       string
	Rates            []float64 // msg/s, one per round
	Broker, DB, Self time.Duration
}

// Drain returns d itself, so that ReportDrains takes a benchmark's own
// drain type that embeds a Drained.
func (d *Drained) Drain() *Drained { return d }

// Round records the rate of one round of d (n messages in took) and logs it.
func (d *Drained) Round(b testing.TB, round, n int, took time.Duration) {
	b.Helper()
	rate := float64(n) / took.Seconds()
	d.Rates = append(d.Rates, rate)
	b.Logf("round %d: %s %s %.0f msg/s", round, d.Kind, d.Name, rate)
}

// ReportDrains reports each drain's median rate, the median of its
// per-round ratios to the bare drain of its kind (named "bare", which
// comes before the others of its kind in ds), and its CPU per message
// (msgs: messages drained by each drain in all rounds); the database's
// only for drains into PostgreSQL (named "postgres…").
func ReportDrains[D interface{ Drain() *Drained }](b *testing.B, drains []D, msgs float64) {
	ds := make([]*Drained, len(drains))
	for i, d := range drains {
		ds[i] = d.Drain()
	}
	b.ReportMetric(0, "ns/op")
	bare := map[string]*Drained{}
	for _, d := range ds {
		if d.Name == "bare" {
			bare[d.Kind] = d
		}
		key := d.Kind + "_" + d.Name
		b.ReportMetric(Median(d.Rates), key+"_msgs/s")
		if base := bare[d.Kind]; base != nil && d != base {
			ratios := make([]float64, len(d.Rates))
			for k := range d.Rates {
				ratios[k] = d.Rates[k] / base.Rates[k]
			}
			b.ReportMetric(Median(ratios), key+"_ratio")
		}
		b.ReportMetric(float64(d.Broker.Microseconds())/msgs, key+"_broker_cpu_µs/msg")
		if strings.HasPrefix(d.Name, "postgres") {
			b.ReportMetric(float64(d.DB.Microseconds())/msgs, key+"_db_cpu_µs/msg")
		}
		b.ReportMetric(float64(d.Self.Microseconds())/msgs, key+"_self_cpu_µs/msg")
	}
}

// BenchRounds returns QUARANTINE_BENCH_ROUNDS (default 5): the rounds of
// a binary-versus-bare benchmark.
func BenchRounds(tb testing.TB) int {
	rounds := 5
	if s := os.Getenv("QUARANTINE_BENCH_ROUNDS"); s != "" {
		if _, err := fmt.Sscan(s, &rounds); err != nil || rounds < 1 {
			tb.Fatalf("QUARANTINE_BENCH_ROUNDS=%q is not a positive count", s)
		}
	}
	return rounds
}

// BenchStores returns QUARANTINE_BENCH_STORES (default postgres and
// sqlite) and QUARANTINE_BENCH_KINDS (default envelope and native) as
// a set.
func BenchStores() (stores []string, kinds map[string]bool) {
	kinds = map[string]bool{}
	for _, k := range EnvList("QUARANTINE_BENCH_KINDS", "envelope", "native") {
		kinds[k] = true
	}
	return EnvList("QUARANTINE_BENCH_STORES", "postgres", "sqlite"), kinds
}

// BenchDatabase returns a new, empty database of store ("postgres": a
// schema of its own with synchronous_commit on, as in production;
// "sqlite": a file in a temporary folder), dropped when tb ends.
func BenchDatabase(tb testing.TB, store string) string {
	switch store {
	case "postgres":
		return pgtest.URL(tb) + "&synchronous_commit=on"
	case "sqlite":
		return "sqlite:" + filepath.Join(tb.TempDir(), "q.db")
	}
	tb.Fatalf("QUARANTINE_BENCH_STORES: unknown store %q", store)
	return ""
}

// BenchMsgs returns QUARANTINE_BENCH_MSGS (default 20000): the messages
// of each drain of a binary-versus-bare benchmark.
func BenchMsgs(tb testing.TB) int {
	n := 20000
	if s := os.Getenv("QUARANTINE_BENCH_MSGS"); s != "" {
		if _, err := fmt.Sscan(s, &n); err != nil || n < 1 {
			tb.Fatalf("QUARANTINE_BENCH_MSGS=%q is not a positive count", s)
		}
	}
	return n
}

package nats

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarantine-dev/quarantine/internal/pgtest"
	"github.com/quarantine-dev/quarantine/internal/procstat"
	"github.com/quarantine-dev/quarantine/internal/testbin"
)

// publishEnvelopes1K publishes n canonical failure envelopes of about
// 1 KiB whose job queue is queue to subject.
func publishEnvelopes1K(b *testing.B, js jetstream.JetStream, subject, queue string, n int) {
	pad := strings.Repeat("x", 560)
	for i := range n {
		body := fmt.Appendf(nil, `{"envelope":"quarantine.failure/v1","job":{"id":"%s-%d","name":"charge-order","queue":%q,"idempotency_key":"order:%s:%d","schema_version":"3","attempts":5,"enqueued_at":"2026-01-02T02:04:05.123456Z","content_type":"application/json","headers":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","x-schema-version":"3"},"payload":{"order_id":%d,"customer":"cust-%06d","amount_cents":%d,"currency":"EUR","lines":[{"sku":"sku-%d","qty":%d}],"note":%q}},"failure":{"class":"exhausted","reason":"attempt 5 of 5 failed: payment gateway timeout after 30s (order %d)","failed_at":"2026-01-02T03:05:05.654321Z","first_failed_at":"2026-01-02T03:04:05Z"}}`,
			queue, i, queue, queue, i, i, i%5000, 100+i%9000, i%300, 1+i%4, pad, i%7)
		if _, err := js.PublishAsync(subject, body); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(60 * time.Second):
		b.Fatal("publishing did not complete")
	}
}

// BenchmarkBinaryVsBareDrain runs the built quarantine binary as a user
// runs it (`quarantine serve` with one NATS collector on a failure stream
// and the default batch size, linger and commits) against a bare drain of
// the same stream (pull batches of 500, double ack each message), on
// canonical envelopes of about 1 KiB. In each of QUARANTINE_BENCH_ROUNDS
// rounds (default 3) it fills a fresh stream with QUARANTINE_BENCH_MSGS
// (default 20000) before each drain: bare, then the binary on PostgreSQL
// (synchronous_commit on) and on SQLite. The binary is timed from its
// connecting until every message is stored. It reports median rates, the
// median per-round ratios to the bare drain and the CPU per message of
// nats-server, PostgreSQL and the binary.
//
//	go test -run '^$' -bench BinaryVsBareDrain -benchtime=1x ./broker/nats/
func BenchmarkBinaryVsBareDrain(b *testing.B) {
	n := benchMsgs(b)
	rounds := 3
	if s := os.Getenv("QUARANTINE_BENCH_ROUNDS"); s != "" {
		fmt.Sscan(s, &rounds)
	}
	url := realURL(b)
	_, js := jsClient(b, url)
	bin := testbin.Path(b)
	databases := map[string]string{
		"postgres": pgtest.URL(b) + "&synchronous_commit=on",
		"sqlite":   "sqlite:" + filepath.Join(b.TempDir(), "q.db"),
	}
	type drain struct {
		name             string
		rates            []float64
		broker, db, self time.Duration
		run              func(stream, queue string, r int) time.Duration
	}
	var drains []*drain
	bare := &drain{name: "bare"}
	bare.run = func(stream, _ string, _ int) time.Duration {
		start := time.Now()
		bareDrain(b, js, stream, n)
		return time.Since(start)
	}
	drains = append(drains, bare)
	for _, s := range []string{"postgres", "sqlite"} {
		count := testbin.StoredCounter(b, databases[s])
		migrate := s == "postgres"
		d := &drain{name: s}
		d.run = func(stream, queue string, r int) time.Duration {
			config := filepath.Join(b.TempDir(), "quarantine.yaml")
			yaml := fmt.Sprintf("database: %q\nlisten: 127.0.0.1:0\ncollectors:\n  - name: bench-%d\n    kind: nats\n    url: %q\n    stream: %s\n",
				databases[s], r, url, stream)
			if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
				b.Fatal(err)
			}
			var args []string
			if migrate {
				args, migrate = []string{"--migrate"}, false
			}
			took, cpu := testbin.Drain(b, bin, config, "connected to NATS", n, func() int { return count(queue) }, args...)
			d.self += cpu
			return took
		}
		drains = append(drains, d)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for r := range rounds {
			for _, d := range drains {
				b.StopTimer()
				stream, queue := uniq("BENCH_BIN"), uniq("billing")
				newStream(b, js, jetstream.StreamConfig{Name: stream})
				publishEnvelopes1K(b, js, stream+".jobs", queue, n)
				procstat.Quiet("nats-server", 0.05, 250*time.Millisecond, 20*time.Second)
				before := procstat.Read("nats-server")
				b.StartTimer()
				took := d.run(stream, queue, r)
				b.StopTimer()
				used := procstat.Read("nats-server").Sub(before)
				d.broker += used.Broker
				d.db += used.DB
				if d == bare {
					d.self += used.Self
				}
				d.rates = append(d.rates, float64(n)/took.Seconds())
				b.Logf("round %d: %s %.0f msg/s", r, d.name, float64(n)/took.Seconds())
			}
		}
	}
	b.ReportMetric(0, "ns/op")
	msgs := float64(n * rounds * b.N)
	for _, d := range drains {
		b.ReportMetric(medianOf(d.rates), d.name+"_msgs/s")
		if d != bare {
			ratios := make([]float64, len(d.rates))
			for k := range d.rates {
				ratios[k] = d.rates[k] / bare.rates[k]
			}
			b.ReportMetric(medianOf(ratios), d.name+"_ratio")
		}
		b.ReportMetric(float64(d.broker.Microseconds())/msgs, d.name+"_broker_cpu_µs/msg")
		if d.name == "postgres" {
			b.ReportMetric(float64(d.db.Microseconds())/msgs, d.name+"_db_cpu_µs/msg")
		}
		b.ReportMetric(float64(d.self.Microseconds())/msgs, d.name+"_self_cpu_µs/msg")
	}
}

// medianOf returns the median of xs (0 for none).
func medianOf(xs []float64) float64 {
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

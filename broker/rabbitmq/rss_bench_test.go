package rabbitmq

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/pgtest"
	"github.com/quarantine-dev/quarantine/internal/testbin"
	"github.com/quarantine-dev/quarantine/store/postgres"
)

// EnvRSSMessages sets how many messages BenchmarkPeakRSS ingests.
const EnvRSSMessages = "QUARANTINE_BENCH_RSS_MSGS"

// BenchmarkPeakRSS runs the quarantine binary with a RabbitMQ collector
// into PostgreSQL, feeds it 1,000,000 messages of 1 KiB (EnvRSSMessages
// overrides), and reports the process's peak resident set (VmHWM) and the
// drain rate. Issue 3 asks for a peak under 200 MB. Run with -benchtime=1x.
func BenchmarkPeakRSS(b *testing.B) {
	n := envInt(EnvRSSMessages, 1_000_000)
	br := newBroker(b)
	dlq := br.failureQueue(nil)
	url := pgtest.URL(b)
	st, err := postgres.Open(context.Background(), url)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	if err := st.Migrate(context.Background()); err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	config := filepath.Join(dir, "quarantine.yaml")
	yaml := fmt.Sprintf("database: %q\nlisten: 127.0.0.1:0\ncollectors:\n  - name: rss\n    kind: rabbitmq\n    url: %q\n    queue: %q\n", url, testURL(), dlq)
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		b.Fatal(err)
	}
	bin := testbin.Path(b)
	body := make([]byte, 1024)
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}
	for b.Loop() {
		p := startProcess(b, bin, config)
		start := time.Now()
		// Publish in chunks while the collector drains, so the benchmark
		// itself never holds the million messages.
		const chunk = 5000
		for sent := 0; sent < n; sent += chunk {
			msgs := make([]amqp.Publishing, min(chunk, n-sent))
			for i := range msgs {
				msgs[i] = amqp.Publishing{MessageId: fmt.Sprintf("rss-%d", sent+i), Body: body, ContentType: "application/json"}
			}
			br.publish(dlq, msgs...)
		}
		deadline := time.Now().Add(30 * time.Minute)
		for {
			counts, err := st.CountByQueue(context.Background(), quarantine.Filter{Source: []string{"rss"}})
			if err != nil {
				b.Fatal(err)
			}
			var total int64
			for _, c := range counts {
				total += c.Count
			}
			if total >= int64(n) {
				break
			}
			if p.exited(0) || time.Now().After(deadline) {
				b.Fatalf("stored %d of %d; process output:\n%s", total, n, p.stderr.String())
			}
			time.Sleep(500 * time.Millisecond)
		}
		took := time.Since(start)
		peak := float64(testbin.PeakRSS(b, p.cmd.Process.Pid))
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		p.exited(20 * time.Second)
		b.ReportMetric(peak/1024, "peak-rss-MB")
		b.ReportMetric(float64(n)/took.Seconds(), "msgs/s")
	}
}

package rabbitmq

import (
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/benchseed"
	"github.com/quarantine-dev/quarantine/internal/testbin"
	"github.com/quarantine-dev/quarantine/store/storetest"
)

// BenchmarkReplayMillion replays QUARANTINE_BENCH_ROWS (default
// 1,000,000) messages by one filter, created and started at once and
// unthrottled, through the built binary to one RabbitMQ queue, on each
// of QUARANTINE_BENCH_STORES (a fresh database seeded first:
// internal/benchseed; on PostgreSQL 30% of the seeded messages are in
// the statuses earlier replays and discards left, and their items are
// skipped). It reports the time from
// the POST until the batch completed and its last message arrived, the
// rate, and serve's peak RSS (VmHWM) over the pin and the replay:
//
//	QUARANTINE_BENCH_STORES=sqlite go test -run '^$' -bench '^BenchmarkReplayMillion$' -benchtime=1x -timeout 1h ./broker/rabbitmq/
func BenchmarkReplayMillion(b *testing.B) { benchseed.EachStore(b, benchReplayMillion) }

func benchReplayMillion(b *testing.B, kind string, rows int) {
	br := newBroker(b)
	// The collector is there for its broker: the replay publishes through
	// it (destination.collector); its own queue stays empty.
	dlq, target := br.failureQueue(nil), br.declare(br.name("million"), nil)
	url, stored := benchseed.Seed(b, kind, rows)
	config := filepath.Join(b.TempDir(), "quarantine.yaml")
	yaml := fmt.Sprintf(`database: %q
listen: 127.0.0.1:0
collectors:
  - name: orders
    kind: rabbitmq
    url: %q
    queue: %q
replay: {canary: 0, max_rate: 1000000}
`, url, testURL(), dlq)
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		b.Fatal(err)
	}
	var args []string
	if kind == "postgres" {
		args = []string{"--migrate"}
	}
	p := testbin.Serve(b, testbin.Path(b), config, args...)
	defer p.Kill()
	api := p.API(p.Token)

	ch, err := br.conn.Channel()
	if err != nil {
		b.Fatal(err)
	}
	defer ch.Close()
	ds, err := ch.Consume(target, "", true, false, false, false, nil)
	if err != nil {
		b.Fatal(err)
	}
	var arrived atomic.Int64
	var last atomic.Int64 // unix nanoseconds of the latest arrival
	go func() {
		for range ds {
			arrived.Add(1)
			last.Store(time.Now().UnixNano())
		}
	}()

	b.ResetTimer()
	t0 := time.Now()
	var created struct {
		Replay struct {
			ID string `json:"id"`
		} `json:"replay"`
	}
	code, raw := api.Do(b, "POST", "/api/v1/replays", map[string]any{
		"filter": map[string]any{"failed_before": storetest.BurstNow}, "expect_count": stored,
		"rate": 1000000, "burst": quarantine.MaxBulk,
		"destination": map[string]any{"collector": "orders", "queue": target}, "reason": "incident",
	}, &created)
	if code != 201 && code != 202 {
		b.Fatalf("POST /api/v1/replays: %d %s", code, raw)
	}
	answered := time.Since(t0)
	var bt struct {
		State  string         `json:"state"`
		Total  int64          `json:"total"`
		Counts map[string]int `json:"counts"`
	}
	var pinned time.Duration
	for deadline := t0.Add(30 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		api.MustDo(b, 200, "GET", "/api/v1/replays/"+created.Replay.ID, nil, &bt)
		if pinned == 0 && bt.State != "pinning" {
			pinned = time.Since(t0)
		}
		if bt.State == "completed" && arrived.Load() >= int64(bt.Counts["published"]) {
			break
		}
		if time.Now().After(deadline) || (bt.State != "running" && bt.State != "pinning" && bt.State != "completed") {
			b.Fatalf("replay %s: %s %v, %d arrived", created.Replay.ID, bt.State, bt.Counts, arrived.Load())
		}
	}
	took := time.Unix(0, last.Load()).Sub(t0)
	b.StopTimer()
	hwm := testbin.PeakRSS(b, p.Cmd.Process.Pid)
	published := bt.Counts["published"]
	if bt.Total != stored || int64(published+bt.Counts["skipped"]) != stored || arrived.Load() != int64(published) {
		b.Fatalf("batch of %d (%v), %d arrived; %d stored", bt.Total, bt.Counts, arrived.Load(), stored)
	}
	api.AuditVerifies(b)
	b.ReportMetric(took.Seconds(), "replay-s")
	b.ReportMetric(float64(published)/took.Seconds(), "published-msgs/s")
	b.ReportMetric(float64(hwm)/1024, "rss-peak-MiB")
	fmt.Printf("%s: %d pinned in %v (answered in %v), %d published and %d skipped, the last arrived after %v; serve peak RSS %d MiB\n",
		kind, bt.Total, pinned.Round(time.Millisecond), answered.Round(time.Millisecond), published, bt.Counts["skipped"],
		took.Round(time.Millisecond), hwm/1024)
}

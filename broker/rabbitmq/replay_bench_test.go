package rabbitmq

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/pgtest"
	"github.com/quarantine-dev/quarantine/internal/testbin"
	"github.com/quarantine-dev/quarantine/replay"
)

// deadLetters1K dead-letters n jobs of 1 KiB into dlq through a work
// queue whose TTL is 0 (native x-death, reason expired), and returns the
// work queue (the messages' queue in the quarantine).
func deadLetters1K(b *testBroker, dlq string, n int, run string) string {
	work := b.workQueue(dlq, amqp.Table{"x-message-ttl": int32(0)})
	pad := strings.Repeat("x", 880)
	ps := numbered(run, n, func(i int, p *amqp.Publishing) {
		p.Body = fmt.Appendf(nil, `{"run":%q,"order_id":%d,"customer":"cust-%06d","amount_cents":%d,"currency":"EUR","note":%q}`,
			run, i, i%5000, 100+i%9000, pad)
		p.ContentType = "application/json"
		p.MessageId = fmt.Sprintf("%s-%d", run, i)
		p.Headers = amqp.Table{"x-idempotency-key": fmt.Sprintf("order:%s:%d", run, i)}
	})
	b.publish(work, ps...)
	return work
}

// shovelMove fills a queue with msgs, then moves them to another queue
// with a dynamic shovel (ack-mode on-confirm, the safe mode, deleting
// itself once the queue is moved) and returns how long the move took.
// It enables the shovel plugin on the broker if needed.
func shovelMove(b *testing.B, br *testBroker, msgs []replay.Outgoing) time.Duration {
	b.Helper()
	// rabbitmq-plugins writes the node's enabled-plugins file, which a
	// private node keeps in its own folder: asked of the node, not the
	// CLI's default (/etc/rabbitmq/enabled_plugins).
	file := strings.Trim(strings.TrimSpace(rabbitmqctl(b, "eval",
		"element(2, application:get_env(rabbit, enabled_plugins_file)).")), `"`)
	cmd := exec.Command("rabbitmq-plugins", append(nodeArgs(b), "enable", "rabbitmq_shovel")...)
	cmd.Env = append(ctlEnv(), "RABBITMQ_ENABLED_PLUGINS_FILE="+file)
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("rabbitmq-plugins enable rabbitmq_shovel: %v\n%s", err, out)
	}
	src, dst := br.declare(br.name("shovel-src"), nil), br.declare(br.name("shovel-dst"), nil)
	for i := range msgs {
		msgs[i].Queue = src
	}
	barePublish(b, src, msgs, 500)
	br.waitDepth(src, len(msgs))
	name := br.name("shovel")
	// Without a path the URI names the default virtual host ("/"); a
	// trailing slash would name the empty one.
	uri := strings.TrimSuffix(testURL(), "/")
	def := fmt.Sprintf(`{"src-protocol":"amqp091","src-uri":%q,"src-queue":%q,"dest-protocol":"amqp091","dest-uri":%q,"dest-queue":%q,"ack-mode":"on-confirm","src-delete-after":"queue-length"}`,
		uri, src, uri, dst)
	start := time.Now()
	rabbitmqctl(b, "set_parameter", "shovel", name, def)
	for deadline := time.Now().Add(2 * time.Minute); br.depth(dst) < len(msgs); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("the shovel moved %d of %d", br.depth(dst), len(msgs))
		}
	}
	took := time.Since(start)
	// The shovel deletes itself once the queue is moved
	// (src-delete-after); clear it only if it is still there.
	cmd = exec.Command("rabbitmqctl", append(nodeArgs(b), "clear_parameter", "shovel", name)...)
	cmd.Env = ctlEnv()
	if out, err := cmd.CombinedOutput(); err != nil && !strings.Contains(string(out), "Parameter does not exist") {
		b.Fatalf("rabbitmqctl clear_parameter shovel %s: %v\n%s", name, err, out)
	}
	return took
}

// replayProfiler is the CPU profile of one replay, or nothing.
type replayProfiler struct{ path string }

// replayProfile returns where the binary writes the CPU profile of its
// replay (from the first POST /replays until both batches completed) when
// $QUARANTINE_BENCH_CPUPROFILE names a folder, and tells the binary's
// profiling hook (testbin.Overlay; testbin.Path adds it then) so:
//
//	QUARANTINE_BENCH_CPUPROFILE=/tmp/prof go test -run '^$' -bench ReplayBinaryVsBare -benchtime=1x ./broker/rabbitmq/
//	go tool pprof -top /tmp/prof/replay-sqlite-*.pprof
func replayProfile(b *testing.B, bin, store string) replayProfiler {
	dir := os.Getenv(testbin.EnvCPUProfile)
	if dir == "" {
		return replayProfiler{}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(dir, fmt.Sprintf("replay-%s-%s-%s.pprof", store, filepath.Base(filepath.Dir(bin)), filepath.Base(bin)))
	_ = os.Remove(path)
	// The hook's variable (testbin's envHookProfile).
	b.Setenv("QUARANTINE_TESTBIN_CPUPROFILE", path)
	return replayProfiler{path}
}

// toggle starts, then stops the profile of p.
func (pr replayProfiler) toggle(b *testing.B, p *testbin.Process) {
	if pr.path != "" {
		p.Signal(b, syscall.SIGUSR1)
	}
}

// wait waits until the profile is written (at most 10 s).
func (pr replayProfiler) wait(b *testing.B) {
	if pr.path == "" {
		return
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(pr.path); err == nil {
			b.Logf("CPU profile of the replay: %s", pr.path)
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("no CPU profile at %s: was the binary built with testbin.Overlay?", pr.path)
		}
	}
}

// BenchmarkReplayBinaryVsBare runs the quarantine binary as users run it
// (embedded SQLite default, canary off, no rate limit that binds; then on
// PostgreSQL) on
// 20,000 native dead letters of 1 KiB that it collected, replays them in
// two batches of 10,000 (the most one batch holds) to two queues at once,
// and compares the time from the first POST /replays until both batches
// completed with a bare amqp091 publisher pipelining confirms (windows of
// 500) of the same 20,000 messages, measured in the same run.
//
//	go test -run '^$' -bench ReplayBinaryVsBare -benchtime=1x ./broker/rabbitmq/
func BenchmarkReplayBinaryVsBare(b *testing.B) {
	for _, st := range []string{"sqlite", "postgres"} {
		b.Run("store="+st, func(b *testing.B) { benchReplayBinary(b, st) })
	}
}

// benchReplayBinary is BenchmarkReplayBinaryVsBare on one store: the
// embedded SQLite or PostgreSQL (a schema of its own).
func benchReplayBinary(b *testing.B, store string) {
	const half = 10000
	br := newBroker(b)
	dlq := br.failureQueue(nil)
	run := fmt.Sprintf("rb%d", time.Now().UnixNano())
	works := []string{deadLetters1K(br, dlq, half, run+"a"), deadLetters1K(br, dlq, half, run+"b")}
	br.waitDepth(dlq, 2*half)

	dir := b.TempDir()
	config := filepath.Join(dir, "quarantine.yaml")
	database := "sqlite:" + filepath.Join(dir, "q.db")
	if store == "postgres" {
		database = pgtest.URL(b)
	}
	yaml := fmt.Sprintf(`database: %q
listen: 127.0.0.1:0
collectors:
  - name: orders
    kind: rabbitmq
    url: %q
    queue: %q
idempotency:
  - queues: ["*"]
    header: x-idempotency-key
replay: {canary: 0, max_rate: 1000000}
`, database, testURL(), dlq)
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		b.Fatal(err)
	}
	bin := testbin.Path(b)
	prof := replayProfile(b, bin, store)
	collectStart := time.Now()
	var args []string
	if store == "postgres" {
		args = append(args, "--migrate")
	}
	p := testbin.Serve(b, bin, config, args...)
	api := p.API(p.Token)
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		var qs struct {
			Items []struct {
				Counts map[string]int `json:"counts"`
			} `json:"items"`
		}
		api.MustDo(b, 200, "GET", "/api/v1/queues", nil, &qs)
		total := 0
		for _, q := range qs.Items {
			total += q.Counts["quarantined"]
		}
		if total == 2*half {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("collected %d of %d", total, 2*half)
		}
	}

	// The replay alone: the store's text-search index of what was just
	// collected is built first (it shares SQLite's one writer); that is
	// part of the collect in the round trip.
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		_, raw := p.API("").Do(b, "GET", "/metrics", nil, nil)
		lag := ""
		for _, l := range strings.Split(string(raw), "\n") {
			if v, ok := strings.CutPrefix(l, "quarantine_search_index_lag_seconds "); ok {
				lag = v
			}
		}
		if lag == "" || lag == "0" {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("the search index still lags %ss", lag)
		}
	}
	collected := time.Since(collectStart)

	// The bare publisher, before and after the replay (the machine is
	// shared: the mean of both is the baseline).
	msgs := outgoing("bare", "", 0, 2*half, 1024)
	bare := func() time.Duration {
		q := br.declare(br.name("bench-bare"), nil)
		for i := range msgs {
			msgs[i].Queue = q
		}
		start := time.Now()
		barePublish(b, q, msgs, 500)
		d := time.Since(start)
		br.deleteNow(q)
		return d
	}
	bare1 := bare()

	targets := []string{br.declare(br.name("target-a"), nil), br.declare(br.name("target-b"), nil)}
	b.ResetTimer()
	prof.toggle(b, p)
	cpu0 := testbin.CPU(p.Cmd.Process.Pid)
	start := time.Now()
	var ids []string
	for i, w := range works {
		var created struct {
			Replay struct {
				ID string `json:"id"`
			} `json:"replay"`
		}
		// 201, or 202 while the batch is pinned in the background.
		status, raw := api.Do(b, "POST", "/api/v1/replays", map[string]any{
			"filter": map[string]any{"queue": []string{w}}, "expect_count": half, "rate": 1000000, "burst": quarantine.MaxBulk,
			"destination": map[string]any{"queue": targets[i]}, "reason": "benchmark",
		}, &created)
		if status != 201 && status != 202 {
			b.Fatalf("POST /api/v1/replays: status %d: %s", status, raw)
		}
		ids = append(ids, created.Replay.ID)
	}
	created := time.Since(start)
	for _, id := range ids {
		for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
			var bt struct {
				State  string         `json:"state"`
				Counts map[string]int `json:"counts"`
			}
			api.MustDo(b, 200, "GET", "/api/v1/replays/"+id, nil, &bt)
			if bt.State == "completed" {
				if bt.Counts["published"] != half {
					b.Fatalf("replay %s: %v", id, bt.Counts)
				}
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("replay %s is %s %v", id, bt.State, bt.Counts)
			}
		}
	}
	took := time.Since(start)
	cpu := testbin.CPU(p.Cmd.Process.Pid) - cpu0
	b.StopTimer()
	prof.toggle(b, p)
	prof.wait(b)
	for _, q := range targets {
		if d := br.depth(q); d != half {
			b.Fatalf("queue %s holds %d, want %d", q, d, half)
		}
	}
	bare2 := bare()
	shovel := shovelMove(b, br, msgs)
	bareRate := float64(2*half) / ((bare1 + bare2).Seconds() / 2)
	replayRate := float64(2*half) / took.Seconds()
	b.ReportMetric(replayRate, "replay-msgs/s")
	b.ReportMetric(bareRate, "bare-msgs/s")
	b.ReportMetric(replayRate/bareRate, "replay/bare")
	b.ReportMetric(created.Seconds(), "create-s")
	// The binary's CPU (user and system) over the replay: steadier than
	// the rates on a shared machine, for comparing builds.
	b.ReportMetric(cpu.Seconds(), "replay-cpu-s")
	// The round trip: collect (from the start of the binary) then replay,
	// against a shovel (ack-mode on-confirm) moving the same number of
	// messages from one queue to another: above 1 beats the shovel.
	b.ReportMetric((collected + took).Seconds(), "roundtrip-s")
	b.ReportMetric(shovel.Seconds(), "shovel-s")
	b.ReportMetric(shovel.Seconds()/(collected+took).Seconds(), "shovel/roundtrip")
}

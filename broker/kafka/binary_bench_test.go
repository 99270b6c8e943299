package kafka

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/quarantine-dev/quarantine/collect"
	"github.com/quarantine-dev/quarantine/internal/testbin"
)

// kafkaBenchKind is one kind of record BenchmarkBinaryVsBareDrain drains:
// records makes n records of about 1 KiB for the dead-letter topic dlt,
// recorded in the quarantine under queue.
type kafkaBenchKind struct {
	name    string
	records func(dlt, queue string, n int) []*kgo.Record
}

var kafkaBenchKinds = []kafkaBenchKind{
	{name: "envelope", records: func(dlt, queue string, n int) []*kgo.Record {
		pad := strings.Repeat("x", 560)
		rs := make([]*kgo.Record, n)
		for i := range rs {
			rs[i] = &kgo.Record{Topic: dlt, Key: fmt.Appendf(nil, "order:%d", i), Value: fmt.Appendf(nil,
				`{"envelope":"quarantine.failure/v1","job":{"id":"%s-%d","name":"charge-order","queue":%q,"idempotency_key":"order:%s:%d","schema_version":"3","attempts":5,"enqueued_at":"2026-01-02T02:04:05.123456Z","content_type":"application/json","headers":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","x-schema-version":"3"},"payload":{"order_id":%d,"customer":"cust-%06d","amount_cents":%d,"currency":"EUR","lines":[{"sku":"sku-%d","qty":%d}],"note":%q}},"failure":{"class":"exhausted","reason":"attempt 5 of 5 failed: payment gateway timeout after 30s (order %d)","failed_at":"2026-01-02T03:05:05.654321Z","first_failed_at":"2026-01-02T03:04:05Z"}}`,
				queue, i, queue, queue, i, i, i%5000, 100+i%9000, i%300, 1+i%4, pad, i%7)}
		}
		return rs
	}},
	{name: "native", records: func(dlt, queue string, n int) []*kgo.Record {
		pad := strings.Repeat("x", 640)
		rs := make([]*kgo.Record, n)
		for i := range rs {
			rs[i] = springRecord(dlt, queue, int32(i%3), int64(i), fmt.Appendf(nil, "cust-%06d", i%5000),
				fmt.Appendf(nil, `{"order_id":%d,"customer":"cust-%06d","amount_cents":%d,"currency":"EUR","note":%q}`, i, i%5000, 100+i%9000, pad),
				time.UnixMilli(1_700_000_000_000+int64(i)), "org.springframework.kafka.listener.ListenerExecutionFailedException", "payment gateway timeout")
			rs[i].Headers = append(rs[i].Headers, kgo.RecordHeader{Key: "x-idempotency-key", Value: fmt.Appendf(nil, "order:%s:%d", queue, i)})
		}
		return rs
	}},
}

// bareDrain is a bare franz-go consumer of topic doing what the Source
// does short of decoding and storing: a consumer group with autocommit
// off, polling batches of the collector's default size (500) and
// committing each synchronously, as RabbitMQ's bare drain acks each
// batch.
func (k *cluster) bareDrain(b *testing.B, topic string, n int) {
	b.Helper()
	cl := k.client(kgo.ConsumerGroup(uniq("bare")), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for got := 0; got < n; {
		recs := cl.PollRecords(ctx, collect.DefaultBatchSize).Records()
		if ctx.Err() != nil {
			b.Fatalf("bare drain: %d of %d", got, n)
		}
		if err := cl.CommitRecords(ctx, recs...); err != nil {
			b.Fatal(err)
		}
		got += len(recs)
	}
	cl.Close()
}

// envBenchKfake says where BenchmarkBinaryVsBareDrain runs its kfake
// cluster: "process" (the default), a process of its own, as RabbitMQ's
// broker is to its benchmark, or "inprocess", in the benchmark's process,
// beside the bare drain.
const envBenchKfake = "QUARANTINE_BENCH_KFAKE"

// BenchmarkBinaryVsBareDrain runs the built quarantine binary as a user
// runs it (`quarantine serve` with one Kafka collector and the default
// batch size, linger and commits) against a bare franz-go consumer of the
// same records (bareDrain), in the same run, on a kfake cluster (3
// partitions) in a process of its own (see envBenchKfake), with two kinds
// of record of about 1 KiB: canonical failure envelopes, and Spring Kafka
// dead letters (native). The broker's CPU per record is reported apart
// (broker_cpu), as RabbitMQ's benchmark reports its broker's.
//
// In each of QUARANTINE_BENCH_ROUNDS rounds (default 5) and for each kind
// it fills a fresh dead-letter topic with QUARANTINE_BENCH_MSGS records
// (default 20000) before each drain: bare, then the binary on each store
// of QUARANTINE_BENCH_STORES (default postgres and sqlite). The binary is
// timed from its first poll until every record is stored, the group join
// included, as the bare drain is. Each drain has a consumer group of its
// own, as the bare one has: the binary is killed (SIGKILL) after its
// drain, and a next binary in the same group would first wait for the
// killed member's session timeout (45 s by default) before the group
// gives it partitions. It reports median rates and the median per-round
// ratio to the bare drain.
//
// The bare drain is defined as RabbitMQ's is (the collector's batch of
// 500, one commit per batch, nothing decoded or stored), but neither
// kfake nor Kafka bounds it as RabbitMQ bounds its own: it drains
// hundreds of thousands of records a second, while the binary is bound by
// its store's inserts (about 70% of its CPU profile on SQLite), so the
// ratio here is far below the RabbitMQ one. docs/benchmarks.md compares
// the two like for like.
//
//	QUARANTINE_BENCH_STORES=sqlite go test -run '^$' -bench BinaryVsBareDrain -benchtime=1x ./broker/kafka/
func BenchmarkBinaryVsBareDrain(b *testing.B) {
	n := testbin.BenchMsgs(b)
	rounds := testbin.BenchRounds(b)
	stores, kinds := testbin.BenchStores()
	var k *cluster
	brokerCPU := func() time.Duration { return 0 } // in the benchmark's process: not told apart
	switch where := os.Getenv(envBenchKfake); where {
	case "", "process":
		var cmd *exec.Cmd
		k, cmd = newClusterProcess(b, 3)
		brokerCPU = func() time.Duration { return testbin.CPU(cmd.Process.Pid) }
	case "inprocess":
		k = newCluster(b, 3)
	default:
		b.Fatalf("%s=%q: process or inprocess", envBenchKfake, where)
	}
	bin := testbin.Path(b)
	databases := map[string]string{}
	counters := map[string]func(string) int{}
	for _, s := range stores {
		databases[s] = testbin.BenchDatabase(b, s)
		counters[s] = testbin.StoredCounter(b, databases[s])
	}
	type drain struct {
		testbin.Drained
		kind kafkaBenchKind
		run  func(dlt, queue string, r int) time.Duration
	}
	var drains []*drain
	migrated := map[string]bool{}
	for _, kind := range kafkaBenchKinds {
		if !kinds[kind.name] {
			continue
		}
		drains = append(drains, &drain{Drained: testbin.Drained{Kind: kind.name, Name: "bare"}, kind: kind, run: func(dlt, _ string, _ int) time.Duration {
			start := time.Now()
			k.bareDrain(b, dlt, n)
			return time.Since(start)
		}})
		for _, s := range stores {
			d := &drain{Drained: testbin.Drained{Kind: kind.name, Name: s}, kind: kind}
			d.run = func(dlt, queue string, r int) time.Duration {
				config := filepath.Join(b.TempDir(), "quarantine.yaml")
				yaml := fmt.Sprintf("database: %q\nlisten: 127.0.0.1:0\nidempotency:\n  - queues: [\"*\"]\n    header: x-idempotency-key\n"+
					"collectors:\n  - name: bench-%s-%d\n    kind: kafka\n    brokers: [%s]\n    topics: [%s]\n    group: %s\n",
					databases[s], kind.name, r, strings.Join(k.addrs, ", "), dlt, uniq("quarantine"))
				if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
					b.Fatal(err)
				}
				var args []string
				if s == "postgres" && !migrated[s] {
					args, migrated[s] = []string{"--migrate"}, true
				}
				took, cpu := testbin.Drain(b, bin, config, "msg=consuming", n, func() int { return counters[s](queue) }, args...)
				d.Self += cpu
				return took
			}
			drains = append(drains, d)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for r := range rounds {
			for _, d := range drains {
				b.StopTimer()
				dlt, queue := uniq("bench.DLT"), uniq("orders")
				if _, err := k.admin().CreateTopic(context.Background(), 3, 1, nil, dlt); err != nil {
					b.Fatal(err)
				}
				k.produce(d.kind.records(dlt, queue, n)...)
				before := brokerCPU()
				b.StartTimer()
				took := d.run(dlt, queue, r)
				b.StopTimer()
				d.Broker += brokerCPU() - before
				d.Round(b, r, n, took)
			}
		}
	}
	testbin.ReportDrains(b, drains, float64(n*rounds*b.N))
}

package rabbitmq

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/quarantine-dev/quarantine/collect"
	"github.com/quarantine-dev/quarantine/internal/procstat"
	"github.com/quarantine-dev/quarantine/internal/testbin"
)

// EnvBenchStores names the stores BenchmarkBinaryVsBareDrain runs the
// binary on: a comma-separated list of postgres and sqlite (default both).
const EnvBenchStores = "QUARANTINE_BENCH_STORES"

// EnvBenchBinaries names the binaries BenchmarkBinaryVsBareDrain runs, as
// a comma-separated list of NAME=PATH (for instance a build before and
// after a change, measured in the same run); by default the one
// testbin.Path gives, named binary.
const EnvBenchBinaries = "QUARANTINE_BENCH_BINARIES"

// EnvBenchKinds names the kinds of message it drains: a comma-separated
// list of envelope and native (default both).
const EnvBenchKinds = "QUARANTINE_BENCH_KINDS"

// envelopes1K publishes n canonical failure envelopes of about 1 KiB (a
// worker's dead letters, as the worker package writes them) to queue;
// their job queue is "orders-"+run.
func envelopes1K(b *testBroker, queue string, n int, run string) {
	pad := strings.Repeat("x", 560)
	ps := numbered(run, n, func(i int, p *amqp.Publishing) {
		p.Body = fmt.Appendf(nil, `{"envelope":"quarantine.failure/v1","job":{"id":"%s-%d","name":"charge-order","queue":"orders-%s","idempotency_key":"order:%s:%d","schema_version":"3","attempts":5,"enqueued_at":"2026-01-02T02:04:05.123456Z","content_type":"application/json","headers":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","x-idempotency-key":"order:%s:%d","x-schema-version":"3"},"payload":{"run":%q,"order_id":%d,"customer":"cust-%06d","amount_cents":%d,"currency":"EUR","lines":[{"sku":"sku-%d","qty":%d}],"note":%q}},"failure":{"class":"exhausted","reason":"attempt 5 of 5 failed: payment gateway timeout after 30s (order %d)","failed_at":"2026-01-02T03:05:05.654321Z","first_failed_at":"2026-01-02T03:04:05Z"}}`,
			run, i, run, run, i, run, i, run, i, i%5000, 100+i%9000, i%300, 1+i%4, pad, i%7)
		p.ContentType = "application/json"
		p.MessageId = fmt.Sprintf("%s-%d", run, i)
	})
	b.publish(queue, ps...)
	b.waitDepth(queue, n)
}

// benchKind is one kind of message BenchmarkBinaryVsBareDrain drains:
// how to declare its failure queue and fill it with n messages. fill
// returns the failure queue and the queue the messages are recorded
// under in the quarantine (their replay destination).
type benchKind struct {
	name string
	fill func(tb *testBroker, n int, run string) (dlq, queue string)
}

var benchKinds = []benchKind{
	{name: "envelope", fill: func(tb *testBroker, n int, run string) (string, string) {
		q := tb.failureQueue(nil)
		envelopes1K(tb, q, n, run)
		return q, "orders-" + run
	}},
	{name: "native", fill: func(tb *testBroker, n int, run string) (string, string) {
		q := tb.failureQueue(amqp.Table{"x-queue-type": "quorum"})
		work := deadLetters1K(tb, q, n, run)
		tb.waitDepth(q, n)
		return q, work
	}},
}

// binaryDrain starts the built binary with the default configuration of
// one RabbitMQ collector on dlq (only the idempotency rule a user of
// native dead letters writes), and returns how long it took from its
// first consuming the queue until count said n messages of queue were
// stored, and the CPU the process used meanwhile.
func binaryDrain(b *testing.B, bin, database string, migrate bool, name, dlq, queue string, n int, count func(queue string) int) (time.Duration, time.Duration) {
	dir := b.TempDir()
	config := filepath.Join(dir, "quarantine.yaml")
	yaml := fmt.Sprintf(`database: %q
listen: 127.0.0.1:0
collectors:
  - name: %s
    kind: rabbitmq
    url: %q
    queue: %q
idempotency:
  - queues: ["*"]
    header: x-idempotency-key
`, database, name, testURL(), dlq)
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		b.Fatal(err)
	}
	var args []string
	if migrate {
		args = append(args, "--migrate")
	}
	// The drain starts when the collector consumes (the log says so
	// right after basic.consume): the process's start-up is not timed.
	return testbin.Drain(b, bin, config, "msg=consuming", n, func() int { return count(queue) }, args...)
}

// roundOrder returns the order of round r: each kind's bare drain first
// (the ratios' reference, measured right after its queue is filled), then
// that kind's other drains rotated by r, so that each binary and store
// comes first as often as the others. A drain pays for some of what the
// one before it left to the database (autovacuum of its new rows, the
// full-page writes of a checkpoint its WAL started): in a fixed order the
// same binary would always pay.
func roundOrder[D any](drains []D, r int, key func(D) (kind string, bare bool)) []D {
	var out []D
	for i := 0; i < len(drains); {
		kind, _ := key(drains[i])
		j := i
		var rest []D
		for ; j < len(drains); j++ {
			k, bare := key(drains[j])
			if k != kind {
				break
			}
			if bare {
				out = append(out, drains[j])
			} else {
				rest = append(rest, drains[j])
			}
		}
		for x := range rest {
			out = append(out, rest[(x+r)%len(rest)])
		}
		i = j
	}
	return out
}

// BenchmarkBinaryVsBareDrain runs the built quarantine binary as a user
// runs it (`quarantine serve` with one RabbitMQ collector and the default
// batch size, linger, commits and prefetch) against a bare amqp091 drain
// of the same messages, on two kinds of message:
//
//   - envelope: canonical failure envelopes of about 1 KiB, published to
//     a classic queue (what the worker package dead-letters);
//   - native: jobs of about 1 KiB that RabbitMQ dead-lettered into a
//     quorum queue (x-death headers, reason expired).
//
// In each of QUARANTINE_BENCH_ROUNDS rounds (default 5) and for each kind
// it fills a fresh queue with QUARANTINE_BENCH_MSGS messages (default
// 20000) before each drain: the bare drain (the binary's default prefetch,
// (commits+1) × batch, and one multiple ack per batch), then the binary
// on PostgreSQL (synchronous_commit on, the production store) and on
// SQLite (the default store, a file in a temporary folder), each store
// kept across rounds, in an order that rotates from round to round
// (roundOrder). The binary's drain is timed from its basic.consume
// until its /metrics counts every message stored; its start-up is not.
//
// It reports the median rate of each drain, the median of the per-round
// ratios to the bare drain of the same round, and the CPU per message of
// the broker, PostgreSQL and the binary.
//
//	go test -run '^$' -bench BinaryVsBareDrain -benchtime=1x ./broker/rabbitmq/
func BenchmarkBinaryVsBareDrain(b *testing.B) {
	n := envInt(EnvBenchMsgs, 20000)
	rounds := envInt(EnvBenchRounds, 5)
	batch := collect.DefaultBatchSize
	prefetch := (collect.DefaultCommits + 1) * batch
	stores := testbin.EnvList(EnvBenchStores, "postgres", "sqlite")
	kinds := map[string]bool{}
	for _, k := range testbin.EnvList(EnvBenchKinds, "envelope", "native") {
		kinds[k] = true
	}
	type binary struct{ name, path string }
	var bins []binary
	for _, nv := range testbin.EnvList(EnvBenchBinaries) {
		name, path, ok := strings.Cut(nv, "=")
		if !ok {
			b.Fatalf("%s: %q is not NAME=PATH", EnvBenchBinaries, nv)
		}
		bins = append(bins, binary{name, path})
	}
	if len(bins) == 0 {
		bins = []binary{{"binary", testbin.Path(b)}}
	}
	tb := newBroker(b)
	// A database per store and binary: builds may differ in migrations.
	databases := map[string]string{}
	counters := map[string]func(string) int{}
	for _, s := range stores {
		for _, bin := range bins {
			key := s + "/" + bin.name
			databases[key] = testbin.BenchDatabase(b, s)
			counters[key] = testbin.StoredCounter(b, databases[key])
		}
	}

	type drain struct {
		testbin.Drained
		run func(dlq, queue string, r int) (time.Duration, time.Duration)
	}
	var drains []*drain
	for _, k := range benchKinds {
		if !kinds[k.name] {
			continue
		}
		drains = append(drains, &drain{Drained: testbin.Drained{Kind: k.name, Name: "bare"}, run: func(q, _ string, _ int) (time.Duration, time.Duration) {
			before := procstat.Read("beam.smp")
			took := bareDrain(b, q, n, prefetch, batch)
			return took, procstat.Read("beam.smp").Sub(before).Self
		}})
		for _, s := range stores {
			for _, bin := range bins {
				migrate := s == "postgres"
				name := s
				if len(bins) > 1 {
					name += "_" + bin.name
				}
				drains = append(drains, &drain{Drained: testbin.Drained{Kind: k.name, Name: name}, run: func(dlq, q string, r int) (time.Duration, time.Duration) {
					took, cpu := binaryDrain(b, bin.path, databases[s+"/"+bin.name], migrate, fmt.Sprintf("bench-%s-%s-%d", k.name, bin.name, r), dlq, q, n, counters[s+"/"+bin.name])
					migrate = false
					return took, cpu
				}})
			}
		}
	}
	fills := map[string]benchKind{}
	for _, k := range benchKinds {
		fills[k.name] = k
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for r := range rounds {
			for _, d := range roundOrder(drains, r, func(d *drain) (string, bool) { return d.Kind, d.Name == "bare" }) {
				b.StopTimer()
				dlq, q := fills[d.Kind].fill(tb, n, fmt.Sprintf("%s-%s-%d-%d-%d", d.Kind, d.Name, time.Now().UnixNano(), i, r))
				procstat.Quiet("beam.smp", 0.05, 250*time.Millisecond, 20*time.Second)
				before := procstat.Read("beam.smp")
				b.StartTimer()
				took, self := d.run(dlq, q, r)
				b.StopTimer()
				used := procstat.Read("beam.smp").Sub(before)
				d.Broker += used.Broker
				d.DB += used.DB
				d.Self += self
				d.Round(b, r, n, took)
			}
		}
	}
	testbin.ReportDrains(b, drains, float64(n*rounds*b.N))
}

// TestRoundOrderRotates checks that each kind's bare drain stays first
// and the others take turns at coming first.
func TestRoundOrderRotates(t *testing.T) {
	t.Parallel()
	drains := []string{"e/bare", "e/pg_a", "e/pg_b", "e/sq_a", "n/bare", "n/pg_a", "n/pg_b", "n/sq_a"}
	key := func(d string) (string, bool) { k, name, _ := strings.Cut(d, "/"); return k, name == "bare" }
	want := map[int]string{
		0: "e/bare e/pg_a e/pg_b e/sq_a n/bare n/pg_a n/pg_b n/sq_a",
		1: "e/bare e/pg_b e/sq_a e/pg_a n/bare n/pg_b n/sq_a n/pg_a",
		2: "e/bare e/sq_a e/pg_a e/pg_b n/bare n/sq_a n/pg_a n/pg_b",
		3: "e/bare e/pg_a e/pg_b e/sq_a n/bare n/pg_a n/pg_b n/sq_a",
	}
	for r, w := range want {
		if got := strings.Join(roundOrder(drains, r, key), " "); got != w {
			t.Errorf("round %d: %s, want %s", r, got, w)
		}
	}
}

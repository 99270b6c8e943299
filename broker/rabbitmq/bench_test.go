package rabbitmq

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
	"github.com/quarantine-dev/quarantine/internal/pgtest"
	"github.com/quarantine-dev/quarantine/internal/procstat"
	"github.com/quarantine-dev/quarantine/store/postgres"
)

// Environment of BenchmarkCollectorVsBareDrain.
const (
	EnvBenchMsgs     = "QUARANTINE_BENCH_MSGS"     // messages per drain (default 20000)
	EnvBenchBatch    = "QUARANTINE_BENCH_BATCH"    // collector batch size (default 500)
	EnvBenchPrefetch = "QUARANTINE_BENCH_PREFETCH" // prefetch (default: the collector's window, (commits+1) × batch)
	EnvBenchCommits  = "QUARANTINE_BENCH_COMMITS"  // collector commits (default collect.DefaultCommits)
	EnvBenchRounds   = "QUARANTINE_BENCH_ROUNDS"   // rounds of the five drains (default 5)
)

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// discard stores nothing: a diagnostic ceiling for the collector itself
// (receive, decode, prepare, ack), not a database stand-in.
type discard struct{}

func (discard) InsertBatch(_ context.Context, msgs []*quarantine.Message) ([]quarantine.InsertResult, error) {
	res := make([]quarantine.InsertResult, len(msgs))
	for i, m := range msgs {
		m.Normalize(time.Now())
		res[i] = quarantine.InsertResult{ID: m.ID, New: true}
	}
	return res, nil
}

// fillDeadLetters dead-letters n realistic jobs into dlq through a work
// queue whose TTL is 0 (native x-death headers, reason expired).
func fillDeadLetters(b *testBroker, dlq string, n int, run string) {
	work := b.workQueue(dlq, amqp.Table{"x-message-ttl": int32(0)})
	ps := numbered(run, n, func(i int, p *amqp.Publishing) {
		p.Body = fmt.Appendf(nil, `{"run":%q,"order_id":%d,"customer":"cust-%06d","amount_cents":%d,"currency":"EUR","lines":[{"sku":"sku-%d","qty":%d}]}`,
			run, i, i%5000, 100+i%9000, i%300, 1+i%4)
		p.ContentType = "application/json"
		p.MessageId = fmt.Sprintf("%s-%d", run, i)
		p.Headers = amqp.Table{"x-idempotency-key": fmt.Sprintf("order:%s:%d", run, i)}
	})
	b.publish(work, ps...)
	b.waitDepth(dlq, n)
}

// bareDrain consumes n messages with a prefetch and acknowledges every
// batch with one multiple ack: the broker's ceiling for this consumer.
func bareDrain(tb testing.TB, queue string, n, prefetch, batch int) time.Duration {
	conn, err := amqp.Dial(testURL())
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		tb.Fatal(err)
	}
	if err := ch.Qos(prefetch, 0, false); err != nil {
		tb.Fatal(err)
	}
	start := time.Now()
	ds, err := ch.Consume(queue, "bare", false, false, false, false, nil)
	if err != nil {
		tb.Fatal(err)
	}
	got := 0
	var last uint64
	pending := 0
	linger := time.NewTimer(time.Hour)
	for got < n {
		select {
		case d := <-ds:
			got++
			pending++
			last = d.DeliveryTag
			if pending == 1 {
				linger.Reset(5 * time.Millisecond)
			}
			if pending < batch && got < n {
				continue
			}
		case <-linger.C:
		}
		if pending > 0 {
			if err := ch.Ack(last, true); err != nil {
				tb.Fatal(err)
			}
			pending = 0
		}
	}
	return time.Since(start)
}

// median returns the median of xs (0 for none). One slow or fast round,
// which this shared machine gives often, moves it little.
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// collectorDrain runs `parallel` collectors of one name (replicas of one
// configuration, each with its own connection) until they stored n
// messages between them.
func collectorDrain(tb testing.TB, name, queue string, st collect.Inserter, n, prefetch, batch, commits, parallel int) time.Duration {
	ctx, cancel := context.WithCancel(context.Background())
	var cs []*collect.Collector
	var srcs []*Source
	done := make(chan struct{}, parallel)
	start := time.Now()
	for range parallel {
		src, err := NewSource(name, Config{URL: testURL(), Queue: queue, Prefetch: prefetch}, nil)
		if err != nil {
			tb.Fatal(err)
		}
		c := collect.New(collect.Config{Name: name, Source: src, Store: st, BatchSize: batch, Linger: 5 * time.Millisecond, Commits: commits,
			Logger:   slog.New(slog.DiscardHandler),
			Preparer: &collect.Preparer{Idempotency: []collect.IdempotencyRule{{Queues: []string{"*"}, Header: "x-idempotency-key"}}}})
		cs, srcs = append(cs, c), append(srcs, src)
		go func() { defer func() { done <- struct{}{} }(); _ = c.Run(ctx) }()
	}
	for {
		total := uint64(0)
		for _, c := range cs {
			s := c.Stats()
			if s.LastError != "" {
				tb.Fatalf("collector error: %s", s.LastError)
			}
			total += s.Stored + s.Duplicates
		}
		if total >= uint64(n) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	took := time.Since(start)
	cancel()
	for range parallel {
		<-done
	}
	for _, s := range srcs {
		_ = s.Close()
	}
	return took
}

// BenchmarkCollectorVsBareDrain drains the same number of native dead
// letters five ways, in each of QUARANTINE_BENCH_ROUNDS rounds (default
// 5): a bare amqp091 consumer (the same prefetch, one multiple ack per
// batch, no store), then the collector as configured by default into
// PostgreSQL (synchronous_commit on), two replicas of it into PostgreSQL,
// one into SQLite, and one into nothing (the collector's own ceiling:
// receive, decode, prepare, normalise, ack). Before each drain it waits
// for RabbitMQ to go quiet, so that what the fill left it doing (writing
// the messages to disk) does not land on the drain.
//
// It reports the median rate of each drain, the median of the per-round
// ratios to the bare drain, and (on Linux) the CPU each message cost the
// broker (beam.smp), PostgreSQL (every postgres process) and this process
// in the bare and PostgreSQL drains: on a small shared machine their sum,
// against the cores there are, is what bounds the rate.
//
//	go test -run '^$' -bench CollectorVsBareDrain -benchtime 1x ./broker/rabbitmq
func BenchmarkCollectorVsBareDrain(b *testing.B) {
	n := envInt(EnvBenchMsgs, 20000)
	rounds := envInt(EnvBenchRounds, 5)
	batch := envInt(EnvBenchBatch, collect.DefaultBatchSize)
	commits := envInt(EnvBenchCommits, collect.DefaultCommits)
	prefetch := envInt(EnvBenchPrefetch, 0) // 0: the collector's window
	barePrefetch := prefetch
	if barePrefetch == 0 {
		barePrefetch = (commits + 1) * batch
	}
	pgURL := pgtest.URL(b) + "&synchronous_commit=on"
	ctx := context.Background()
	pg, err := postgres.Open(ctx, pgURL)
	if err != nil {
		b.Fatal(err)
	}
	defer pg.Close()
	if err := pg.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	var sync string
	if err := pg.Pool().QueryRow(ctx, "SHOW synchronous_commit").Scan(&sync); err != nil || sync != "on" {
		b.Fatalf("synchronous_commit is %q (%v), want on", sync, err)
	}
	lite := testStore(b)
	tb := newBroker(b)

	type drain struct {
		name  string
		run   func(dlq string) time.Duration
		rates []float64
		cpu   procstat.Usage
	}
	drains := []*drain{
		{name: "bare", run: func(dlq string) time.Duration { return bareDrain(b, dlq, n, barePrefetch, batch) }},
		{name: "pg", run: func(dlq string) time.Duration {
			return collectorDrain(b, "bench-pg", dlq, pg, n, prefetch, batch, commits, 1)
		}},
		{name: "pg2", run: func(dlq string) time.Duration {
			return collectorDrain(b, "bench-pg2", dlq, pg, n, prefetch, batch, commits, 2)
		}},
		{name: "sqlite", run: func(dlq string) time.Duration {
			return collectorDrain(b, "bench-sqlite", dlq, lite, n, prefetch, batch, commits, 1)
		}},
		{name: "discard", run: func(dlq string) time.Duration {
			return collectorDrain(b, "bench-discard", dlq, discard{}, n, prefetch, batch, commits, 1)
		}},
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for r := range rounds {
			for _, d := range drains {
				b.StopTimer()
				dlq := tb.failureQueue(nil)
				fillDeadLetters(tb, dlq, n, fmt.Sprintf("%s-%d-%d", d.name, i, r))
				procstat.Quiet("beam.smp", 0.05, 250*time.Millisecond, 20*time.Second)
				before := procstat.Read("beam.smp")
				b.StartTimer()
				took := d.run(dlq)
				b.StopTimer()
				d.cpu = d.cpu.Add(procstat.Read("beam.smp").Sub(before))
				d.rates = append(d.rates, float64(n)/took.Seconds())
				b.Logf("round %d: %s %.0f msg/s", r, d.name, float64(n)/took.Seconds())
			}
		}
	}
	b.ReportMetric(0, "ns/op")
	bare := drains[0]
	for _, d := range drains {
		b.ReportMetric(median(d.rates), d.name+"_msgs/s")
		if d != bare {
			ratios := make([]float64, len(d.rates))
			for k := range d.rates {
				ratios[k] = d.rates[k] / bare.rates[k]
			}
			b.ReportMetric(median(ratios), d.name+"_ratio")
		}
		if d.name == "bare" || d.name == "pg" {
			d.cpu.Report(b, d.name, n*rounds*b.N)
		}
	}
}

// BenchmarkDecode decodes one realistic native dead letter.
func BenchmarkDecode(b *testing.B) {
	d := amqp.Delivery{
		Body:        []byte(`{"order_id":42,"customer":"cust-000042","amount_cents":1234,"currency":"EUR","lines":[{"sku":"sku-1","qty":2}]}`),
		ContentType: "application/json", MessageId: "order-42", Timestamp: time.Now(),
		Headers: with(xdeath("orders", "rejected", 3), "x-idempotency-key", "order:42"),
	}
	dec := decoder{source: "bench"}
	b.ReportAllocs()
	for b.Loop() {
		_ = dec.decode(&d)
	}
}

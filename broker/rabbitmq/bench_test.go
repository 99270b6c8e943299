package rabbitmq

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
	"github.com/quarantine-dev/quarantine/internal/pgtest"
	"github.com/quarantine-dev/quarantine/store/postgres"
)

// Environment of BenchmarkCollectorVsBareDrain.
const (
	EnvBenchMsgs     = "QUARANTINE_BENCH_MSGS"     // messages per drain (default 20000)
	EnvBenchBatch    = "QUARANTINE_BENCH_BATCH"    // collector batch size (default 500)
	EnvBenchPrefetch = "QUARANTINE_BENCH_PREFETCH" // prefetch (default: twice the batch size, as the collector uses)
)

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// timedStore measures the time spent in InsertBatch.
type timedStore struct {
	collect.Inserter
	busy atomic.Int64
}

func (s *timedStore) InsertBatch(ctx context.Context, msgs []*quarantine.Message) ([]quarantine.InsertResult, error) {
	start := time.Now()
	res, err := s.Inserter.InsertBatch(ctx, msgs)
	s.busy.Add(int64(time.Since(start)))
	return res, err
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

// collectorDrain runs `parallel` collectors of one name (replicas of one
// configuration, each with its own connection) until they stored n
// messages between them.
func collectorDrain(tb testing.TB, name, queue string, st collect.Inserter, n, prefetch, batch, parallel int) time.Duration {
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
		c := collect.New(collect.Config{Name: name, Source: src, Store: st, BatchSize: batch, Linger: 5 * time.Millisecond,
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
// letters five ways in one run: a bare amqp091 consumer (prefetch, one
// multiple ack per batch, no store), then the collector into PostgreSQL
// (synchronous_commit on), two replicas of it into PostgreSQL (two
// commits in flight), one into SQLite, and one into nothing (the
// collector's own ceiling: receive, decode, prepare, normalise, ack). It
// reports each rate, its ratio to the bare drain, and the share of the
// PostgreSQL run spent inside InsertBatch.
//
//	go test -run '^$' -bench CollectorVsBareDrain -benchtime 1x ./broker/rabbitmq
func BenchmarkCollectorVsBareDrain(b *testing.B) {
	n := envInt(EnvBenchMsgs, 20000)
	batch := envInt(EnvBenchBatch, collect.DefaultBatchSize)
	prefetch := envInt(EnvBenchPrefetch, 2*batch)
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

	var bare, pgT, pg2T, liteT, none time.Duration
	var pgBusy time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		dlq := tb.failureQueue(nil)
		fillDeadLetters(tb, dlq, n, fmt.Sprintf("bare%d", i))
		b.StartTimer()
		bare += bareDrain(b, dlq, n, prefetch, batch)

		b.StopTimer()
		fillDeadLetters(tb, dlq, n, fmt.Sprintf("pg%d", i))
		ts := &timedStore{Inserter: pg}
		b.StartTimer()
		pgT += collectorDrain(b, "bench-pg", dlq, ts, n, prefetch, batch, 1)
		pgBusy += time.Duration(ts.busy.Load())

		b.StopTimer()
		fillDeadLetters(tb, dlq, n, fmt.Sprintf("pg2-%d", i))
		b.StartTimer()
		pg2T += collectorDrain(b, "bench-pg2", dlq, pg, n, prefetch, batch, 2)

		b.StopTimer()
		fillDeadLetters(tb, dlq, n, fmt.Sprintf("lite%d", i))
		b.StartTimer()
		liteT += collectorDrain(b, "bench-sqlite", dlq, lite, n, prefetch, batch, 1)

		b.StopTimer()
		fillDeadLetters(tb, dlq, n, fmt.Sprintf("none%d", i))
		b.StartTimer()
		none += collectorDrain(b, "bench-discard", dlq, discard{}, n, prefetch, batch, 1)
	}
	rate := func(d time.Duration) float64 { return float64(n*b.N) / d.Seconds() }
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(rate(bare), "bare_msgs/s")
	b.ReportMetric(rate(pgT), "pg_msgs/s")
	b.ReportMetric(rate(pgT)/rate(bare), "pg_ratio")
	b.ReportMetric(pgBusy.Seconds()/pgT.Seconds(), "pg_insert_share")
	b.ReportMetric(rate(pg2T), "pg2_msgs/s")
	b.ReportMetric(rate(pg2T)/rate(bare), "pg2_ratio")
	b.ReportMetric(rate(liteT), "sqlite_msgs/s")
	b.ReportMetric(rate(liteT)/rate(bare), "sqlite_ratio")
	b.ReportMetric(rate(none), "discard_msgs/s")
	b.ReportMetric(rate(none)/rate(bare), "discard_ratio")
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

package nats

import (
	"context"
	"errors"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/pgtest"
	"github.com/quarantine-dev/quarantine/internal/procstat"
	"github.com/quarantine-dev/quarantine/store/postgres"
)

// benchBatch is the batch (pull size, collector batch) of both drains.
const benchBatch = 500

func benchMsgs(b *testing.B) int {
	n := 20000
	if s := os.Getenv("QUARANTINE_BENCH_MSGS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v <= 0 {
			b.Fatalf("QUARANTINE_BENCH_MSGS=%q is not a positive count", s)
		}
		n = v
	}
	return n
}

// BenchmarkDrain compares, in one run against the running NATS server,
// the collector (JetStream -> decode -> PostgreSQL with synchronous_commit
// on -> double ack) with a bare drain of the same stream (pull the same
// batch, double ack each message the same way, no store). It reports both
// rates, their ratio, the rate of InsertBatch alone, and (on Linux) the
// CPU each message cost nats-server, PostgreSQL and this process.
//
//	go test ./broker/nats -run '^$' -bench Drain -benchtime 1x
func BenchmarkDrain(b *testing.B) {
	n := benchMsgs(b)
	url := realURL(b)
	_, js := jsClient(b, url)
	ctx := context.Background()
	st, err := postgres.Open(ctx, pgtest.URL(b)+"&synchronous_commit=on")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	if err := st.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	var bare, coll, store time.Duration
	var bareCPU, collCPU procstat.Usage
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		s1 := uniq("BENCH_BARE")
		newStream(b, js, jetstream.StreamConfig{Name: s1})
		publishEnvelopes(b, js, s1+".jobs", "billing", 0, n)
		s2 := uniq("BENCH_COLL")
		newStream(b, js, jetstream.StreamConfig{Name: s2})
		publishEnvelopes(b, js, s2+".jobs", "billing", 0, n)
		b.StartTimer()

		cpu := procstat.Read("nats-server")
		start := time.Now()
		bareDrain(b, js, s1, n)
		bare += time.Since(start)
		bareCPU = bareCPU.Add(procstat.Read("nats-server").Sub(cpu))

		name := uniq("bench")
		cpu = procstat.Read("nats-server")
		start = time.Now()
		r := runCollector(b, name, Config{URL: url, Stream: s2}, st, nil, benchBatch)
		for r.col.Stats().Stored < uint64(n) {
			time.Sleep(time.Millisecond)
		}
		coll += time.Since(start)
		collCPU = collCPU.Add(procstat.Read("nats-server").Sub(cpu))
		r.stop()
		b.StopTimer()
		if got := storedCount(b, st, name); got != n {
			b.Fatalf("stored %d of %d", got, n)
		}
		store += storeOnly(b, st, n)
		b.StartTimer()
	}
	total := float64(n * b.N)
	bareRate, collRate := total/bare.Seconds(), total/coll.Seconds()
	b.ReportMetric(bareRate, "bare-msgs/s")
	b.ReportMetric(collRate, "collector-msgs/s")
	b.ReportMetric(collRate/bareRate, "ratio")
	// The store alone (InsertBatch of the same decoded messages, same
	// batch, no broker) bounds what any collector can reach.
	b.ReportMetric(total/store.Seconds(), "store-only-msgs/s")
	// Where each message's CPU went (Linux): what bounds the rates on a
	// machine whose cores the broker, PostgreSQL and the collector share.
	bareCPU.Report(b, "bare", n*b.N)
	collCPU.Report(b, "collector", n*b.N)
}

// storeOnly times InsertBatch of n decoded envelopes in batches.
func storeOnly(b *testing.B, st *postgres.Store, n int) time.Duration {
	b.Helper()
	name, now := uniq("store"), time.Now()
	var took time.Duration
	for first := 0; first < n; first += benchBatch {
		msgs := make([]*quarantine.Message, 0, benchBatch)
		for i := first; i < min(first+benchBatch, n); i++ {
			msgs = append(msgs, decodeFailure(name, streamMsg{Stream: name, Seq: uint64(i + 1), Time: now,
				Subject: "jobs", Data: envelopeBody(i, "billing")}))
		}
		start := time.Now()
		if _, err := st.InsertBatch(context.Background(), msgs); err != nil {
			b.Fatal(err)
		}
		took += time.Since(start)
	}
	return took
}

// bareDrain pulls n messages in batches and double-acks each, the way the
// Source does, without decoding or storing them.
func bareDrain(b *testing.B, js jetstream.JetStream, stream string, n int) {
	b.Helper()
	ctx := context.Background()
	c, err := js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{
		Durable: "bare", AckPolicy: jetstream.AckExplicitPolicy, AckWait: DefaultAckWait,
		MaxDeliver: -1, MaxAckPending: maxAckPending,
	})
	if err != nil {
		b.Fatal(err)
	}
	for got := 0; got < n; {
		batch, err := c.Fetch(benchBatch, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			b.Fatal(err)
		}
		var msgs []jetstream.Msg
		for m := range batch.Messages() {
			msgs = append(msgs, m)
		}
		errs := parallel(len(msgs), ackConcurrency, func(i int) error { return msgs[i].DoubleAck(ctx) })
		if _, first := countErrors(errs); first != nil && !errors.Is(first, jetstream.ErrMsgAlreadyAckd) {
			b.Fatal(first)
		}
		got += len(msgs)
	}
}

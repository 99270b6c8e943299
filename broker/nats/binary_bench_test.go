package nats

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

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

// deadLetters1K makes a work-queue stream of jobs whose worker consumer
// ("worker") gives up after one delivery, creates its capture stream (as
// the collector's first start does, so that the advisories wait for the
// collector), publishes n jobs of about 1 KiB with an idempotency header
// and fails each once (nak), and waits until the capture stream holds
// the n MaxDeliver advisories. It returns the worker stream; the jobs'
// queue in the quarantine is its subject, stream+".jobs".
func deadLetters1K(b *testing.B, js jetstream.JetStream, url string, n int) string {
	b.Helper()
	ctx := context.Background()
	stream := uniq("BENCH_JOBS")
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{stream + ".>"}, Retention: jetstream.WorkQueuePolicy}); err != nil {
		b.Fatal(err)
	}
	c, err := js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{
		Durable: "worker", AckPolicy: jetstream.AckExplicitPolicy, MaxDeliver: 1,
		FilterSubject: stream + ".jobs", AckWait: 30 * time.Second, MaxAckPending: 20000,
	})
	if err != nil {
		b.Fatal(err)
	}
	src, err := NewSource("bench", Config{URL: url, Advisories: &AdvisoryConfig{Stream: stream, Consumer: "worker"}}, quietLogger())
	if err != nil {
		b.Fatal(err)
	}
	if err := src.ensureCapture(ctx, js); err != nil {
		b.Fatal(err)
	}
	_ = src.Close()
	pad := strings.Repeat("x", 880)
	for i := range n {
		msg := &nats.Msg{Subject: stream + ".jobs", Header: nats.Header{"X-Idempotency-Key": {fmt.Sprintf("order:%s:%d", stream, i)}},
			Data: fmt.Appendf(nil, `{"run":%q,"order_id":%d,"customer":"cust-%06d","amount_cents":%d,"currency":"EUR","note":%q}`,
				stream, i, i%5000, 100+i%9000, pad)}
		if _, err := js.PublishMsgAsync(msg); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(60 * time.Second):
		b.Fatal("publishing did not complete")
	}
	// The failing worker: every job is nak'ed once, the consumer gives up.
	// It keeps pulling until every advisory is out: the server sees that
	// a nak'ed job has had its deliveries when it would deliver it again.
	capture := captureStreamName(stream, "worker")
	captured := func() uint64 {
		st, err := js.Stream(ctx, capture)
		if err != nil {
			b.Fatal(err)
		}
		return st.CachedInfo().State.Msgs
	}
	for deadline := time.Now().Add(120 * time.Second); captured() < uint64(n); {
		if time.Now().After(deadline) {
			b.Fatalf("%d advisories captured of %d", captured(), n)
		}
		batch, err := c.Fetch(500, jetstream.FetchMaxWait(100*time.Millisecond))
		if err != nil {
			b.Fatal(err)
		}
		for m := range batch.Messages() {
			if err := m.Nak(); err != nil {
				b.Fatal(err)
			}
		}
	}
	return stream
}

// bareAdvisoryDrain does what a bare client of MaxDeliver advisories must
// do for each given-up job, without decoding or storing it: pull the
// advisories from the capture stream in batches of benchBatch, get each
// original by its stream sequence, double-ack the advisory and delete the
// original (the collector's delete_after_store), at the collector's
// concurrency.
func bareAdvisoryDrain(b *testing.B, js jetstream.JetStream, stream string, n int) {
	b.Helper()
	ctx := context.Background()
	worker, err := js.Stream(ctx, stream)
	if err != nil {
		b.Fatal(err)
	}
	c, err := js.CreateOrUpdateConsumer(ctx, captureStreamName(stream, "worker"), jetstream.ConsumerConfig{
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
		errs := parallel(len(msgs), ackConcurrency, func(i int) error {
			a, err := parseAdvisory(msgs[i].Data(), stream, "worker")
			if err != nil {
				return err
			}
			if _, err := worker.GetMsg(ctx, a.StreamSeq); err != nil {
				return err
			}
			if err := msgs[i].DoubleAck(ctx); err != nil {
				return err
			}
			return worker.DeleteMsg(ctx, a.StreamSeq)
		})
		if _, first := countErrors(errs); first != nil {
			b.Fatal(first)
		}
		got += len(msgs)
	}
}

// natsBenchKind is one kind of message BenchmarkBinaryVsBareDrain drains:
// fill makes a fresh stream of n messages and returns it, the queue they
// are recorded under and the collector's YAML keys besides name, kind and
// url; bare drains it without a store; clean deletes what fill made.
type natsBenchKind struct {
	name  string
	fill  func(b *testing.B, js jetstream.JetStream, url string, n int) (stream, queue, keys string)
	bare  func(b *testing.B, js jetstream.JetStream, stream string, n int)
	clean func(js jetstream.JetStream, stream string)
}

var natsBenchKinds = []natsBenchKind{
	{name: "envelope",
		fill: func(b *testing.B, js jetstream.JetStream, _ string, n int) (string, string, string) {
			stream, queue := uniq("BENCH_BIN"), uniq("billing")
			if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: stream, Subjects: []string{stream + ".>"}}); err != nil {
				b.Fatal(err)
			}
			publishEnvelopes1K(b, js, stream+".jobs", queue, n)
			return stream, queue, fmt.Sprintf("    stream: %s\n", stream)
		},
		bare: bareDrain,
		clean: func(js jetstream.JetStream, stream string) {
			_ = js.DeleteStream(context.Background(), stream)
		}},
	{name: "native",
		fill: func(b *testing.B, js jetstream.JetStream, url string, n int) (string, string, string) {
			stream := deadLetters1K(b, js, url, n)
			return stream, stream + ".jobs", fmt.Sprintf("    advisories:\n      stream: %s\n      consumer: worker\n    delete_after_store: true\n", stream)
		},
		bare: bareAdvisoryDrain,
		clean: func(js jetstream.JetStream, stream string) {
			_ = js.DeleteStream(context.Background(), stream)
			_ = js.DeleteStream(context.Background(), captureStreamName(stream, "worker"))
		}},
}

// BenchmarkBinaryVsBareDrain runs the built quarantine binary as a user
// runs it (`quarantine serve` with one NATS collector and the default
// batch size, linger and commits) against a bare drain of the same
// messages, on two kinds of message:
//
//   - envelope: canonical failure envelopes of about 1 KiB on a failure
//     stream (mode a); the bare drain pulls batches of 500 and double-acks
//     each message, the way the Source does;
//   - native: jobs of about 1 KiB that a worker consumer gave up on
//     (MaxDeliver 1), whose advisories wait in the capture stream (mode b,
//     delete_after_store as the example configuration has it); the bare
//     drain pulls the advisories, gets each original, double-acks the
//     advisory and deletes the original.
//
// In each of QUARANTINE_BENCH_ROUNDS rounds (default 5) and for each kind
// it fills a fresh stream with QUARANTINE_BENCH_MSGS messages (default
// 20000) before each drain: bare, then the binary on PostgreSQL
// (synchronous_commit on) and on SQLite (QUARANTINE_BENCH_STORES narrows
// the stores, QUARANTINE_BENCH_KINDS the kinds). The binary is timed from
// its connecting until every message is stored; its start-up is not. It
// reports median rates, the median per-round ratios to the bare drain and
// the CPU per message of nats-server, PostgreSQL and the binary.
//
//	go test -run '^$' -bench BinaryVsBareDrain -benchtime=1x ./broker/nats/
func BenchmarkBinaryVsBareDrain(b *testing.B) {
	n := benchMsgs(b)
	rounds := testbin.BenchRounds(b)
	stores, kinds := testbin.BenchStores()
	url := realURL(b)
	_, js := jsClient(b, url)
	bin := testbin.Path(b)
	databases := map[string]string{}
	counters := map[string]func(string) int{}
	for _, s := range stores {
		databases[s] = testbin.BenchDatabase(b, s)
		counters[s] = testbin.StoredCounter(b, databases[s])
	}
	type drain struct {
		testbin.Drained
		kind natsBenchKind
		run  func(stream, queue, keys string, r int) time.Duration
	}
	var drains []*drain
	migrated := map[string]bool{}
	for _, k := range natsBenchKinds {
		if !kinds[k.name] {
			continue
		}
		drains = append(drains, &drain{Drained: testbin.Drained{Kind: k.name, Name: "bare"}, kind: k, run: func(stream, _, _ string, _ int) time.Duration {
			start := time.Now()
			k.bare(b, js, stream, n)
			return time.Since(start)
		}})
		for _, s := range stores {
			d := &drain{Drained: testbin.Drained{Kind: k.name, Name: s}, kind: k}
			d.run = func(stream, queue, keys string, r int) time.Duration {
				config := filepath.Join(b.TempDir(), "quarantine.yaml")
				// The one idempotency rule a user of native dead letters writes.
				yaml := fmt.Sprintf("database: %q\nlisten: 127.0.0.1:0\nidempotency:\n  - queues: [\"*\"]\n    header: x-idempotency-key\ncollectors:\n  - name: bench-%s-%d\n    kind: nats\n    url: %q\n%s",
					databases[s], k.name, r, url, keys)
				if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
					b.Fatal(err)
				}
				var args []string
				if s == "postgres" && !migrated[s] {
					args, migrated[s] = []string{"--migrate"}, true
				}
				took, cpu := testbin.Drain(b, bin, config, "connected to NATS", n, func() int { return counters[s](queue) }, args...)
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
				stream, queue, keys := d.kind.fill(b, js, url, n)
				procstat.Quiet("nats-server", 0.05, 250*time.Millisecond, 20*time.Second)
				before := procstat.Read("nats-server")
				b.StartTimer()
				took := d.run(stream, queue, keys, r)
				b.StopTimer()
				used := procstat.Read("nats-server").Sub(before)
				d.Broker += used.Broker
				d.DB += used.DB
				if d.Name == "bare" {
					d.Self += used.Self
				}
				d.kind.clean(js, stream)
				d.Round(b, r, n, took)
			}
		}
	}
	testbin.ReportDrains(b, drains, float64(n*rounds*b.N))
}

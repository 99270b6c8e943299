package rabbitmq

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/replay"
)

// BenchmarkReplayPublishVsBare publishes QUARANTINE_BENCH_MSGS (default
// 20000) messages of 1 KiB with the replay Publisher in slices of 500, and
// the same with a bare amqp091 publisher pipelining its confirms in
// windows of 500, each into a fresh queue, and reports both rates and
// their ratio (replay / bare); then with two callers sharing the
// Publisher (as the engine's workers do: one writes while the other waits
// for its confirms), their rate and its ratio to the bare one
// (replay2/bare).
func BenchmarkReplayPublishVsBare(b *testing.B) {
	const slice, size = 500, 1024
	n := envInt(EnvBenchMsgs, 20000)
	br := newBroker(b)
	var replayDur, bareDur, replay2Dur time.Duration
	for b.Loop() {
		q := br.declare(br.name("bench-bare"), nil)
		msgs := outgoing("bench", q, 0, n, size)
		start := time.Now()
		barePublish(b, q, msgs, slice)
		bareDur += time.Since(start)
		br.deleteNow(q)

		q = br.declare(br.name("bench-replay"), nil)
		for i := range msgs {
			msgs[i].Queue = q
		}
		p := NewPublisher(Config{URL: testURL()}, "bench", testLogger(b))
		start = time.Now()
		for lo := 0; lo < n; lo += slice {
			for i, r := range p.Publish(context.Background(), msgs[lo:min(lo+slice, n)]) {
				if r.Outcome != quarantine.ItemPublished {
					b.Fatalf("message %d: %s %v", lo+i, r.Outcome, r.Err)
				}
			}
		}
		replayDur += time.Since(start)
		br.deleteNow(q)

		q = br.declare(br.name("bench-replay2"), nil)
		for i := range msgs {
			msgs[i].Queue = q
		}
		var next atomic.Int64
		var wg sync.WaitGroup
		start = time.Now()
		for range 2 {
			wg.Go(func() {
				for {
					lo := int(next.Add(slice)) - slice
					if lo >= n {
						return
					}
					for i, r := range p.Publish(context.Background(), msgs[lo:min(lo+slice, n)]) {
						if r.Outcome != quarantine.ItemPublished {
							b.Errorf("message %d: %s %v", lo+i, r.Outcome, r.Err)
							return
						}
					}
				}
			})
		}
		wg.Wait()
		replay2Dur += time.Since(start)
		_ = p.Close()
		br.deleteNow(q)
	}
	total := float64(n * b.N)
	replayRate, bareRate, replay2Rate := total/replayDur.Seconds(), total/bareDur.Seconds(), total/replay2Dur.Seconds()
	b.ReportMetric(replayRate, "replay-msgs/s")
	b.ReportMetric(bareRate, "bare-msgs/s")
	b.ReportMetric(replayRate/bareRate, "replay/bare")
	b.ReportMetric(replay2Rate/bareRate, "replay2/bare")
}

// barePublish is the broker's ceiling for this workload: one confirm-mode
// channel, the same properties, windows of confirms, nothing else.
func barePublish(b *testing.B, queue string, msgs []replay.Outgoing, window int) {
	conn, err := amqp.Dial(testURL())
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		b.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	pending := make([]*amqp.DeferredConfirmation, 0, window)
	for lo := 0; lo < len(msgs); lo += window {
		pending = pending[:0]
		for i := lo; i < min(lo+window, len(msgs)); i++ {
			m := &msgs[i]
			h := make(amqp.Table, len(m.Headers))
			for k, v := range m.Headers {
				h[k] = v
			}
			c, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", queue, true, false, amqp.Publishing{
				Headers: h, ContentType: m.ContentType, DeliveryMode: amqp.Persistent,
				MessageId: m.MessageID, Type: m.JobName, Body: m.Payload})
			if err != nil {
				b.Fatal(err)
			}
			pending = append(pending, c)
		}
		for _, c := range pending {
			if ok, err := c.WaitContext(ctx); !ok || err != nil {
				b.Fatalf("not confirmed: %v", err)
			}
		}
	}
}

// deleteNow deletes queue (declared by this broker) at once.
func (b *testBroker) deleteNow(queue string) {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, err := b.ch.QueueDelete(queue, false, false, false); err != nil {
		b.t.Fatalf("delete %s: %v", queue, err)
	}
}

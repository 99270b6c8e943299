package pubsub

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	ps "cloud.google.com/go/pubsub/v2"

	"github.com/quarantine-dev/quarantine/internal/testbin"
)

// deadLetters1K publishes n messages of about 1 KiB to topic as a
// dead-letter policy forwards them from subscription source.
func (s *server) deadLetters1K(topic, source string, n int) {
	pad := strings.Repeat("x", 760)
	ms := make([]*ps.Message, n)
	for i := range ms {
		ms[i] = forwarded(&ps.Message{Data: fmt.Appendf(nil, `{"order_id":%d,"customer":"cust-%06d","amount_cents":%d,"currency":"EUR","note":%q}`,
			i, i%5000, 100+i%9000, pad), Attributes: map[string]string{"x-idempotency-key": fmt.Sprintf("order:%s:%d", topic, i)}},
			source, "5", time.Now())
	}
	s.publish(topic, ms...)
}

// bareDrain is a bare subscriber of sub doing what the Source does short
// of decoding and storing: a streaming pull acknowledging every message.
func (s *server) bareDrain(b *testing.B, sub string, n int) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var got atomic.Int64
	subr := s.cl.Subscriber(sub)
	subr.ReceiveSettings.MaxOutstandingMessages = 1500
	err := subr.Receive(ctx, func(_ context.Context, m *ps.Message) {
		m.Ack()
		if got.Add(1) == int64(n) {
			cancel()
		}
	})
	if err != nil || got.Load() < int64(n) {
		b.Fatalf("bare drain: %d of %d, %v", got.Load(), n, err)
	}
}

// BenchmarkBinaryVsBareDrain runs the built quarantine binary (`quarantine
// serve` with one pubsub collector and the default batch size, linger and
// commits) against a bare streaming-pull subscriber of the same messages,
// in the same run, on an in-process pstest server: messages of about
// 1 KiB as a dead-letter policy forwards them. Rounds, messages and
// stores as in the other brokers' (QUARANTINE_BENCH_ROUNDS,
// QUARANTINE_BENCH_MSGS, QUARANTINE_BENCH_STORES), except that the
// messages default to 2000: pstest bounds both drains (it hands a
// streaming pull about one message per 10 ms tick, after walking every
// message it holds), at about 70 msg/s for 5000, and a bare drain of
// 20000 stalls.
//
//	QUARANTINE_BENCH_STORES=sqlite go test -run '^$' -bench BinaryVsBareDrain -benchtime=1x ./broker/pubsub/
func BenchmarkBinaryVsBareDrain(b *testing.B) {
	n := 2000
	if os.Getenv("QUARANTINE_BENCH_MSGS") != "" {
		n = testbin.BenchMsgs(b)
	}
	rounds := testbin.BenchRounds(b)
	stores, _ := testbin.BenchStores()
	s := newServer(b)
	s.topic("orders")
	s.subscription("orders-worker", "orders", "", 0)
	bin := testbin.Path(b)
	databases := map[string]string{}
	counters := map[string]func(string) int{}
	for _, st := range stores {
		databases[st] = testbin.BenchDatabase(b, st)
		counters[st] = testbin.StoredCounter(b, databases[st])
	}
	type drain struct {
		testbin.Drained
		run func(sub string, r int) time.Duration
	}
	drains := []*drain{{Drained: testbin.Drained{Kind: "native", Name: "bare"}, run: func(sub string, _ int) time.Duration {
		start := time.Now()
		s.bareDrain(b, sub, n)
		return time.Since(start)
	}}}
	migrated := map[string]bool{}
	for _, st := range stores {
		d := &drain{Drained: testbin.Drained{Kind: "native", Name: st}}
		d.run = func(sub string, r int) time.Duration {
			config := filepath.Join(b.TempDir(), "quarantine.yaml")
			yaml := fmt.Sprintf("database: %q\nlisten: 127.0.0.1:0\nidempotency:\n  - queues: [\"*\"]\n    header: x-idempotency-key\n"+
				"collectors:\n  - name: bench-%s-%d\n    kind: pubsub\n    project: %s\n    subscription: %s\n    endpoint: %s\n",
				databases[st], sub, r, project, sub, s.srv.Addr)
			if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
				b.Fatal(err)
			}
			var args []string
			if st == "postgres" && !migrated[st] {
				args, migrated[st] = []string{"--migrate"}, true
			}
			// All land in queue "orders": count from what was there.
			base := counters[st]("orders")
			took, cpu := testbin.Drain(b, bin, config, "msg=consuming", n, func() int { return counters[st]("orders") - base }, args...)
			d.Self += cpu
			return took
		}
		drains = append(drains, d)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for r := range rounds {
			for k, d := range drains {
				b.StopTimer()
				dlt := fmt.Sprintf("orders.dlq-%d-%d-%d", i, r, k)
				s.topic(dlt)
				s.subscription(dlt+"-q", dlt, "", 0)
				s.deadLetters1K(dlt, "orders-worker", n)
				b.StartTimer()
				took := d.run(dlt+"-q", r)
				b.StopTimer()
				d.Round(b, r, n, took)
			}
		}
	}
	testbin.ReportDrains(b, drains, float64(n*rounds*b.N))
}

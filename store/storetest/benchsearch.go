package storetest

import (
	"context"
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store"
)

// SearchTerm is one kind of text search that BenchSearch times: Text(i)
// is the text of call i (a new term each call, so that no call is
// answered from what the one before left in the caches), Filter the other
// filters, and Min and Max bound how many messages the first page holds
// (a check that the seed has the frequency the name claims).
type SearchTerm struct {
	Name     string
	Text     func(i int) string
	Filter   quarantine.Filter
	Min, Max int
}

// SearchTerms are the kinds of term both stores' BenchmarkSearch time on
// rows seeded messages in 20 queues (queue-00 …) whose reasons read
// "… failure <i mod 101>: upstream timeout …":
//
//   - rare: the payload term of one message, rare(n) for a message n;
//     rare+queue: with that message's queue;
//   - sparse, given by the caller: a term of a few payloads;
//   - pct1: a reason prefix of about 1 in 101 messages;
//   - frequent: "upstream timeout", in every reason; frequent+queue: with
//     a queue;
//   - none: a term no message holds.
func SearchTerms(rows int, rare func(n int) string, sparse SearchTerm) []SearchTerm {
	pick := func(i int) int { return (i*7919 + 12345) % rows }
	queue := func(n int) string { return fmt.Sprintf("queue-%02d", n%20) }
	return []SearchTerm{
		{Name: "rare", Text: func(i int) string { return rare(pick(i)) }, Min: 1, Max: 1},
		{Name: "rare+queue", Text: func(i int) string { return rare(pick(i)) },
			Filter: quarantine.Filter{Queue: []string{queue(pick(0))}}, Max: 1},
		sparse,
		{Name: "pct1", Text: func(i int) string { return fmt.Sprintf("failure %d:", i%101) }, Min: 50, Max: 50},
		{Name: "frequent", Text: func(int) string { return "upstream timeout" }, Min: 50, Max: 50},
		{Name: "frequent+queue", Text: func(int) string { return "Upstream TIMEOUT" },
			Filter: quarantine.Filter{Queue: []string{"queue-07"}}, Min: 50, Max: 50},
		{Name: "none", Text: func(i int) string { return fmt.Sprintf("no such thing %d", i) }, Max: 0},
	}
}

// BenchSearch measures the first page (limit 50) of ListMessages with
// text on a seeded store: opSamples timed calls of each term per
// iteration, interleaved, reported as name-p50-µs and name-p99-µs.
func BenchSearch(b *testing.B, s store.Store, terms []SearchTerm) {
	ctx := b.Context()
	d := map[string][]time.Duration{}
	calls := 0
	for b.Loop() {
		for range opSamples / 10 {
			for _, t := range terms {
				d[t.Name] = append(d[t.Name], timed(b, 10, func(int) error {
					f := t.Filter
					f.Text, f.Limit = t.Text(calls), 50
					calls++
					p, err := s.ListMessages(ctx, f)
					if err == nil && (len(p.Messages) < t.Min || len(p.Messages) > t.Max) {
						b.Fatalf("%s: q=%q found %d messages on the first page, want %d to %d", t.Name, f.Text, len(p.Messages), t.Min, t.Max)
					}
					return err
				})...)
			}
		}
	}
	for _, t := range terms {
		report(b, t.Name, d[t.Name])
	}
}

// Indexer is a store with a search index kept by IndexSearch.
type Indexer interface {
	store.Store
	IndexSearch(ctx context.Context, n int) (int, error)
}

// indexPayload is 1 KiB of JSON that differs from one message to the
// next all along (hex digests), the most trigrams a payload of that size
// gives an index.
func indexPayload(i int) []byte {
	p := fmt.Appendf(nil, `{"order_id":"o-%d","customer":"c-%d","notes":"`, i, i%9973)
	for j := 0; len(p) < 1022; j++ {
		p = fmt.Appendf(p, "%x ", sha256.Sum256(fmt.Appendf(nil, "%d/%d", i, j)))
	}
	return append(p[:1022], '"', '}')
}

// BenchSearchIndexer measures how fast the search indexer drains its
// queue (reported as index-msgs/s): total messages with distinct 1 KiB
// payloads are inserted (untimed, in batches of 1000), then IndexSearch
// runs in batches of 1000 until the queue is empty. s must be opened
// without its background indexer.
func BenchSearchIndexer(b *testing.B, s Indexer, total int) {
	ctx := b.Context()
	run := quarantine.NewID(time.Now())
	var indexed int
	var took time.Duration
	for b.Loop() {
		b.StopTimer()
		for lo := 0; lo < total; lo += 1000 {
			msgs := make([]*quarantine.Message, 0, 1000)
			for i := lo; i < min(lo+1000, total); i++ {
				key := fmt.Sprintf("index-%s-%d", run, indexed+i)
				msgs = append(msgs, &quarantine.Message{
					Source: "bench-index", SourceKind: quarantine.SourceMemory, Queue: fmt.Sprintf("queue-%02d", i%20),
					JobName: fmt.Sprintf("job-%d", i%7), IdempotencyKey: key, DedupeKey: key, FailureClass: quarantine.ClassExhausted,
					Reason:  fmt.Sprintf("failure %d: upstream timeout after %dms", i%101, 100+i%900),
					Payload: indexPayload(indexed + i), ContentType: "application/json",
				})
			}
			if _, err := s.InsertBatch(ctx, msgs); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		t0 := time.Now()
		for {
			n, err := s.IndexSearch(ctx, 1000)
			if err != nil {
				b.Fatal(err)
			}
			if n == 0 {
				break
			}
		}
		took += time.Since(t0)
		indexed += total
	}
	b.ReportMetric(float64(indexed)/took.Seconds(), "index-msgs/s")
}

// BenchSearchLag measures the search index's lag under a steady ingest,
// as a collector at a moderate rate drives the store: batches of 100
// messages with distinct 1 KiB payloads at rate messages a second for
// the given duration, the lag read after each batch. It reports the
// largest lag seen (lag-max-s) and the lag at the end (lag-end-s). s
// must run its background indexer.
func BenchSearchLag(b *testing.B, s store.Store, rate int, d time.Duration) {
	ctx := b.Context()
	const per = 100
	run := quarantine.NewID(time.Now())
	var worst, end time.Duration
	for b.Loop() {
		start := time.Now()
		for i := 0; time.Since(start) < d; i++ {
			msgs := make([]*quarantine.Message, per)
			for j := range msgs {
				n := i*per + j
				key := fmt.Sprintf("lag-%s-%d", run, n)
				msgs[j] = &quarantine.Message{
					Source: "bench-lag", SourceKind: quarantine.SourceMemory, Queue: fmt.Sprintf("queue-%02d", n%20),
					JobName: fmt.Sprintf("job-%d", n%7), IdempotencyKey: key, DedupeKey: key, FailureClass: quarantine.ClassExhausted,
					Reason:  fmt.Sprintf("failure %d: upstream timeout after %dms", n%101, 100+n%900),
					Payload: indexPayload(n), ContentType: "application/json",
				}
			}
			if _, err := s.InsertBatch(ctx, msgs); err != nil {
				b.Fatal(err)
			}
			lag, err := s.SearchLag(ctx)
			if err != nil {
				b.Fatal(err)
			}
			worst, end = max(worst, lag), lag
			// The next batch is due at the rate, from the start.
			time.Sleep(time.Until(start.Add(time.Duration(i+1) * per * time.Second / time.Duration(rate))))
		}
		run += "x"
	}
	b.ReportMetric(worst.Seconds(), "lag-max-s")
	b.ReportMetric(end.Seconds(), "lag-end-s")
}

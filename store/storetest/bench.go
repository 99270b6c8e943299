package storetest

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store"
)

// seedBase is the newest failed_at of seeded messages; they spread over the
// 30 days before it. Fixed, so that a seeded database can be reused.
var seedBase = time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)

const seedBatch = 1000

// benchPayload is 1 KiB of JSON.
func benchPayload(i int) []byte {
	p := fmt.Appendf(nil, `{"order_id":"o-%d","customer":"c-%d","items":[`, i, i%9973)
	for len(p) < 1000 {
		p = fmt.Appendf(p, `{"sku":"sku-%d","qty":%d},`, len(p), len(p)%7)
	}
	p = append(p[:len(p)-1], ']', '}')
	for len(p) < 1024 {
		p = append(p, ' ')
	}
	return p[:1024]
}

// BenchInsertBatch measures InsertBatch of 1 KiB payloads at the given
// batch size; reports msgs/s via b.ReportMetric. Every message is new.
func BenchInsertBatch(b *testing.B, s store.Store, batch int) {
	run := quarantine.NewID(time.Now())
	payload := benchPayload(0)
	n := 0
	for b.Loop() {
		msgs := make([]*quarantine.Message, batch)
		for i := range msgs {
			n++
			msgs[i] = benchMsg("bench-insert", fmt.Sprintf("bench-%s-%d", run, n), n, payload)
		}
		if _, err := s.InsertBatch(b.Context(), msgs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "msgs/s")
}

// seedKey is the idempotency and dedupe key of seeded message i.
func seedKey(source string, i int) string { return fmt.Sprintf("%s-%d", source, i) }

// seedMsg is seeded message i: deterministic, so re-seeding dedupes.
func seedMsg(source string, i int) *quarantine.Message {
	h := uint64(i)*0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019 // spread failed_at pseudo-randomly
	h ^= h >> 29
	age := time.Duration(h%uint64(30*24*time.Hour/time.Microsecond)) * time.Microsecond
	q := i % 20
	failed := seedBase.Add(-age)
	return &quarantine.Message{
		Source: source, SourceKind: quarantine.SourceMemory,
		Queue: fmt.Sprintf("queue-%02d", q), JobName: fmt.Sprintf("job-%d", i%7),
		MessageID: fmt.Sprintf("m-%d", i), IdempotencyKey: seedKey(source, i), DedupeKey: seedKey(source, i),
		Attempts: 1 + i%5, FailureClass: quarantine.FailureClasses[i%len(quarantine.FailureClasses)],
		Reason:  fmt.Sprintf("seeded failure %d: upstream timeout after %dms", i%101, 100+i%900),
		Payload: benchPayload(i), ContentType: "application/json",
		Headers:  map[string]string{"x-seed": "1"},
		FailedAt: failed, CollectedAt: failed.Add(time.Minute),
		Owner: fmt.Sprintf("team-%d", q%5),
	}
}

// SeedMessages inserts n messages (spread over 20 queues, 5 owners, all
// quarantined, failed_at spread over 30 days) in batches of 1000. It is
// idempotent per (n, source): batches already stored are skipped, so a
// seeded database can be reused across runs.
func SeedMessages(tb testing.TB, s store.Store, n int, source string) {
	tb.Helper()
	ctx := tb.Context()
	batches := (n + seedBatch - 1) / seedBatch
	lo := firstUnseeded(tb, s, n, source)
	for b := lo; b < batches; b++ {
		msgs := make([]*quarantine.Message, 0, seedBatch)
		for i := b * seedBatch; i < min((b+1)*seedBatch, n); i++ {
			msgs = append(msgs, seedMsg(source, i))
		}
		if _, err := s.InsertBatch(ctx, msgs); err != nil {
			tb.Fatal(err)
		}
	}
}

// BenchList reports p50/p99 latency (b.ReportMetric, "first-p50-µs",
// "first-p99-µs", "deep-p50-µs", "deep-p99-µs") of ListMessages(limit 50)
// at the first page and at a page deep in the set (reached by a cursor
// taken from a message ~90% into the order), and the ratio of the p50s
// ("deep/first"). Seed the store first (SeedMessages).
func BenchList(b *testing.B, s store.Store) {
	ctx := b.Context()
	counts, err := s.CountByQueue(ctx, quarantine.Filter{})
	if err != nil {
		b.Fatal(err)
	}
	var total int64
	for _, c := range counts {
		total += c.Count
	}
	if total < 100 {
		b.Fatalf("BenchList needs a seeded store, it holds %d messages", total)
	}
	// Walk to ~90% of the order with the largest pages.
	target := int(total * 9 / 10)
	f := quarantine.Filter{Limit: quarantine.MaxLimit}
	var deep *quarantine.Cursor
	for seen := 0; deep == nil; {
		p, err := s.ListMessages(ctx, f)
		if err != nil {
			b.Fatal(err)
		}
		if seen+len(p.Messages) > target || p.Next == nil {
			deep = quarantine.CursorOf(p.Messages[min(target-seen, len(p.Messages)-1)])
			break
		}
		seen += len(p.Messages)
		f.After = p.Next
	}
	var first, deepDur []time.Duration
	page := func(after *quarantine.Cursor) time.Duration {
		t0 := time.Now()
		p, err := s.ListMessages(ctx, quarantine.Filter{Limit: 50, After: after})
		d := time.Since(t0)
		if err != nil || len(p.Messages) != 50 {
			b.Fatalf("ListMessages: %d messages, %v", len(p.Messages), err)
		}
		return d
	}
	// A group's first page (the click from the groups view), for a
	// seeded group and for a fingerprint without messages.
	groups, err := s.Groups(ctx, quarantine.Filter{Limit: 1})
	if err != nil || len(groups) == 0 {
		b.Fatalf("Groups: %v, %v", groups, err)
	}
	var group, none []time.Duration
	groupPage := func(fp string, want int) time.Duration {
		t0 := time.Now()
		p, err := s.ListMessages(ctx, quarantine.Filter{Limit: 50, Fingerprint: []string{fp}})
		d := time.Since(t0)
		if err != nil || len(p.Messages) < want || (want == 0) != (len(p.Messages) == 0) {
			b.Fatalf("ListMessages of group %s: %d messages, %v; want %d or more", fp, len(p.Messages), err, want)
		}
		return d
	}
	wantGroup := int(min(groups[0].Count, 50))
	// listSamples pairs per iteration, so that -benchtime=1x still gives
	// a p99 worth reading.
	const listSamples = 300
	for b.Loop() {
		for i := range listSamples {
			first = append(first, page(nil))
			deepDur = append(deepDur, page(deep))
			if i%30 == 0 {
				group = append(group, groupPage(groups[0].Fingerprint, wantGroup))
				none = append(none, groupPage("0000000000000000000000000000000f", 0))
			}
		}
	}
	reportPercentiles(b, "group", group)
	reportPercentiles(b, "nogroup", none)
	p50f := reportPercentiles(b, "first", first)
	p50d := reportPercentiles(b, "deep", deepDur)
	if p50f > 0 {
		b.ReportMetric(p50d/p50f, "deep/first")
	}
}

// reportPercentiles reports the p50 and p99 of ds as name-p50-µs and
// name-p99-µs, and returns the p50.
func reportPercentiles(b *testing.B, name string, ds []time.Duration) float64 {
	p50, p99 := percentiles(ds)
	b.ReportMetric(p50, name+"-p50-µs")
	b.ReportMetric(p99, name+"-p99-µs")
	return p50
}

// percentiles returns the p50 and p99 of ds in microseconds.
func percentiles(ds []time.Duration) (p50, p99 float64) {
	if len(ds) == 0 {
		return 0, 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(q float64) float64 {
		return float64(s[min(len(s)-1, int(q*float64(len(s))))].Nanoseconds()) / 1e3
	}
	return at(0.50), at(0.99)
}

// BenchInsertRatio inserts total new messages (1 KiB payloads) at each of
// the batch sizes 1, 100 and 1000, into the same store, and reports each
// rate ("b1-msgs/s", "b100-msgs/s", "b1000-msgs/s") and the ratio
// "b1000/b1". Run it with -benchtime=1x: one iteration is 3 x total inserts.
func BenchInsertRatio(b *testing.B, s store.Store, total int) {
	rates := map[int]float64{}
	for b.Loop() {
		for _, batch := range []int{1, 100, 1000} {
			run := quarantine.NewID(time.Now())
			payload := benchPayload(batch)
			t0 := time.Now()
			for n := 0; n < total; {
				msgs := make([]*quarantine.Message, 0, batch)
				for i := 0; i < batch && n < total; i++ {
					n++
					msgs = append(msgs, benchMsg("bench-ratio", fmt.Sprintf("ratio-%s-%d", run, n), n, payload))
				}
				if _, err := s.InsertBatch(b.Context(), msgs); err != nil {
					b.Fatal(err)
				}
			}
			rates[batch] = float64(total) / time.Since(t0).Seconds()
		}
	}
	b.ReportMetric(rates[1], "b1-msgs/s")
	b.ReportMetric(rates[100], "b100-msgs/s")
	b.ReportMetric(rates[1000], "b1000-msgs/s")
	if rates[1] > 0 {
		b.ReportMetric(rates[1000]/rates[1], "b1000/b1")
	}
}

// EnvCount returns the integer in the environment variable name, or def
// when it is unset; a value that is not a number of at least 1000 fails tb.
func EnvCount(tb testing.TB, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1000 {
		tb.Fatalf("%s=%q: want a number of at least 1000", name, v)
	}
	return n
}

// firstUnseeded is the first batch of seedBatch messages of a seed of n
// from source that is not stored yet. Batches commit whole and in order,
// so a binary search over their last keys finds it.
func firstUnseeded(tb testing.TB, s store.Store, n int, source string) int {
	tb.Helper()
	stored := func(i int) bool {
		p, err := s.ListMessages(tb.Context(), quarantine.Filter{Source: []string{source}, IdempotencyKey: []string{seedKey(source, i)}, Limit: 1})
		if err != nil {
			tb.Fatal(err)
		}
		return len(p.Messages) == 1
	}
	lo, hi := 0, (n+seedBatch-1)/seedBatch
	for lo < hi {
		mid := (lo + hi) / 2
		if stored(min((mid+1)*seedBatch, n) - 1) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// benchMsg is the n-th message of a benchmark's run from source: key is
// its idempotency and dedupe key, its queue one of 20 by n.
func benchMsg(source, key string, n int, payload []byte) *quarantine.Message {
	return &quarantine.Message{
		Source: source, SourceKind: quarantine.SourceMemory, Queue: fmt.Sprintf("queue-%02d", n%20),
		JobName: "bench", IdempotencyKey: key, DedupeKey: key, FailureClass: quarantine.ClassExhausted,
		Reason: "benchmark failure", Payload: payload, ContentType: "application/json",
		Headers: map[string]string{"x-bench": "1"}, Owner: "team-bench",
	}
}

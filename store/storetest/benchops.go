package storetest

import (
	"cmp"
	"slices"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store"
)

// opSamples is how many timed calls of each operation one iteration of
// BenchOperations makes, so that -benchtime=1x still gives a p99 worth
// reading.
const opSamples = 200

// timed calls fn n times and returns each duration; fn gets the call's
// index (a seed, a page).
func timed(b *testing.B, n int, fn func(i int) error) []time.Duration {
	b.Helper()
	out := make([]time.Duration, 0, n)
	for i := range n {
		t0 := time.Now()
		if err := fn(i); err != nil {
			b.Fatal(err)
		}
		out = append(out, time.Since(t0))
	}
	return out
}

// report reports the p50 and p99 of ds (µs) as name-p50-µs and
// name-p99-µs, and returns the p50.
func report(b *testing.B, name string, ds []time.Duration) float64 {
	p50, p99 := percentiles(ds)
	b.ReportMetric(p50, name+"-p50-µs")
	b.ReportMetric(p99, name+"-p99-µs")
	return p50
}

// deepCursor returns a cursor about 90% into the list order of f, found
// from a sample (its 10% quantile by failed_at), without walking the list.
func deepCursor(b *testing.B, s store.Store, f quarantine.Filter) *quarantine.Cursor {
	b.Helper()
	ms, err := s.Sample(b.Context(), quarantine.SampleRequest{Filter: f, Size: quarantine.MaxSample, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	if len(ms) < 20 {
		b.Fatalf("the store holds %d messages matching %+v: seed it first", len(ms), f)
	}
	slices.SortFunc(ms, func(x, y *quarantine.Message) int {
		return cmp.Or(x.FailedAt.Compare(y.FailedAt), cmp.Compare(x.ID, y.ID))
	})
	return quarantine.CursorOf(ms[len(ms)/10])
}

// BenchOperations measures the read operations of the REST API on a
// seeded store, opSamples timed calls each per iteration, and reports
// (b.ReportMetric) the p50 and p99 in µs of:
//
//   - list: the first page of ListMessages (limit 50);
//   - deep: a page about 90% into the order (cursor from a sample);
//   - qlist, qdeep: the same filtered by the busiest queue and status
//     quarantined;
//   - sample: Sample of 100, a new seed each call;
//   - strat: Sample of 100 stratified by fingerprint;
//   - groups: Groups without a filter; qgroups: of quarantined messages;
//   - queues: QueueStats without a filter;
//
// and the ratios deep/first and qdeep/qfirst (target <= 1.3) and
// sample/list (target <= 2) of the p50s.
func BenchOperations(b *testing.B, s store.Store) {
	ctx := b.Context()
	now := time.Now()
	stats, err := s.QueueStats(ctx, quarantine.Filter{}, now)
	if err != nil {
		b.Fatal(err)
	}
	if len(stats) == 0 {
		b.Fatal("BenchOperations needs a seeded store")
	}
	busiest := slices.MaxFunc(stats, func(x, y quarantine.QueueStats) int {
		return cmp.Compare(x.Counts[quarantine.StatusQuarantined], y.Counts[quarantine.StatusQuarantined])
	})
	all := quarantine.Filter{Limit: 50}
	qf := quarantine.Filter{Queue: []string{busiest.Queue}, Status: []quarantine.Status{quarantine.StatusQuarantined}, Limit: 50}
	deep, qdeep := deepCursor(b, s, all), deepCursor(b, s, qf)
	page := func(f quarantine.Filter, after *quarantine.Cursor) func(int) error {
		return func(int) error {
			f.After = after
			p, err := s.ListMessages(ctx, f)
			if err == nil && len(p.Messages) != f.Limit {
				b.Fatalf("a page of %d messages, want %d", len(p.Messages), f.Limit)
			}
			return err
		}
	}
	sampleOf := func(by string) func(int) error {
		return func(i int) error {
			ms, err := s.Sample(ctx, quarantine.SampleRequest{Size: 100, StratifyBy: by, Seed: int64(i) + 1000})
			if err == nil && len(ms) != 100 {
				b.Fatalf("a sample of %d messages, want 100", len(ms))
			}
			return err
		}
	}
	groups := func(f quarantine.Filter) func(int) error {
		return func(int) error { _, err := s.Groups(ctx, f); return err }
	}
	var d = map[string][]time.Duration{}
	for b.Loop() {
		// Interleaved, so that a slow moment of the machine hits every
		// operation alike.
		for range opSamples / 10 {
			d["list"] = append(d["list"], timed(b, 10, page(all, nil))...)
			d["deep"] = append(d["deep"], timed(b, 10, page(all, deep))...)
			d["qlist"] = append(d["qlist"], timed(b, 10, page(qf, nil))...)
			d["qdeep"] = append(d["qdeep"], timed(b, 10, page(qf, qdeep))...)
			d["sample"] = append(d["sample"], timed(b, 10, sampleOf(quarantine.StratifyNone))...)
			d["strat"] = append(d["strat"], timed(b, 10, sampleOf(quarantine.StratifyFingerprint))...)
			d["groups"] = append(d["groups"], timed(b, 10, groups(quarantine.Filter{}))...)
			d["qgroups"] = append(d["qgroups"], timed(b, 10, groups(quarantine.Filter{Status: []quarantine.Status{quarantine.StatusQuarantined}}))...)
			d["queues"] = append(d["queues"], timed(b, 10, func(int) error { _, err := s.QueueStats(ctx, quarantine.Filter{}, now); return err })...)
		}
	}
	p := map[string]float64{}
	for _, name := range []string{"list", "deep", "qlist", "qdeep", "sample", "strat", "groups", "qgroups", "queues"} {
		p[name] = report(b, name, d[name])
	}
	if p["list"] > 0 && p["qlist"] > 0 {
		b.ReportMetric(p["deep"]/p["list"], "deep/first")
		b.ReportMetric(p["qdeep"]/p["qlist"], "qdeep/qfirst")
		b.ReportMetric(p["sample"]/p["list"], "sample/list")
	}
}

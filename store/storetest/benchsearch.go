package storetest

import (
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

package postgres_test

import (
	"slices"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/postgres"
)

// TestTextSearchPlansAgree checks that ListMessages with text, whichever
// plan it takes (the window of the newest candidates, or the trigram
// indexes), walks exactly the pages the indexed query alone gives.
func TestTextSearchPlansAgree(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	seed(t, s, postgres.TextWindow+2000)
	// A rare term only in the oldest messages, far beyond the window.
	_, err := s.Pool().Exec(t.Context(), `UPDATE messages SET reason = reason || ' Zebra-Needle'
		WHERE id IN (SELECT id FROM messages ORDER BY failed_at, id LIMIT 3)`)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		f    quarantine.Filter
	}{
		{"common term fills the window", quarantine.Filter{Text: "upstream TIMEOUT", Limit: 50}},
		{"payload term", quarantine.Filter{Text: "sku-7", Limit: 20}},
		{"rare term beyond the window", quarantine.Filter{Text: "zebra-needle", Limit: 2}},
		{"no match", quarantine.Filter{Text: "no such thing", Limit: 10}},
		// Terms whose probe asks the index for a few of their trigrams.
		{"rare order ID", quarantine.Filter{Text: `"IDEM-3210"`, Limit: 10}},
		{"trigrams apart, not the term", quarantine.Filter{Text: "needle-zebra", Limit: 10}},
		{"narrow filter, window holds all", quarantine.Filter{Text: "failure 7:", IdempotencyKey: []string{"idem-7", "idem-107", "idem-8"}}},
		{"queue filter", quarantine.Filter{Text: "after 1", Queue: []string{"queue-03"}, Limit: 100}},
	}
	for _, c := range cases {
		got := walk(t, c.f, func(f quarantine.Filter) quarantine.MessagePage {
			p, err := s.ListMessages(t.Context(), f)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			return p
		})
		want := indexedIDs(t, s, c.f)
		if !slices.Equal(got, want) {
			t.Fatalf("%s: ListMessages walked %d messages, the indexed query finds %d", c.name, len(got), len(want))
		}
		if c.name == "rare term beyond the window" && len(got) != 3 {
			t.Fatalf("rare term: found %d messages, want 3", len(got))
		}
		if c.name == "rare order ID" && len(got) != 1 {
			t.Fatalf("rare order ID: found %d messages, want 1", len(got))
		}
	}
}

// TestProbeTrigramsAfterABurst checks that the probe's trigram choice does
// not take the newest documents for a sample of all: after a burst whose
// payloads have another shape (no order IDs "idem-…"), the trigrams of
// "idem-" are still in most documents and are not chosen as rare ones
// (the probe would then test every document), and the search still finds
// its one match.
func TestProbeTrigramsAfterABurst(t *testing.T) {
	t.Parallel()
	// The test indexes by itself: a background indexer beside it
	// deadlocked with it on the same documents.
	s := openStore(t, postgres.WithoutSearchIndexer())
	seed(t, s, 2000)
	// The burst: the 300 newest messages (by ID, as messages arrive)
	// with payloads of another shape.
	_, err := s.Pool().Exec(t.Context(), `UPDATE payload_versions SET payload_text = '{"order_id":"o-' || message_id || '","note":"burst"}'
		WHERE message_id IN (SELECT id FROM messages ORDER BY id DESC LIMIT 300)`)
	if err != nil {
		t.Fatal(err)
	}
	seedSearch(t, s) // indexes the burst's new payloads
	got, err := postgres.ProbeTrigrams(t.Context(), s, `"idem-1234"`, 1e6)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 || slices.Contains(got, "ide") || slices.Contains(got, "dem") {
		t.Fatalf(`the probe of "idem-1234" asks the index for %q, want some of 123 and 234 only`, got)
	}
	p, err := s.ListMessages(t.Context(), quarantine.Filter{Text: `"idem-1234"`})
	if err != nil || len(p.Messages) != 1 {
		t.Fatalf(`search of "idem-1234": %d messages, %v; want 1`, len(p.Messages), err)
	}
}

// walk follows pages of f (at most 3, enough to cross the window twice).
func walk(t *testing.T, f quarantine.Filter, list func(quarantine.Filter) quarantine.MessagePage) []string {
	t.Helper()
	var ids []string
	for range 3 {
		p := list(f)
		for _, m := range p.Messages {
			ids = append(ids, m.ID)
		}
		if p.Next == nil {
			break
		}
		f.After = p.Next
	}
	return ids
}

// indexedIDs runs the indexed text query alone over the same pages.
func indexedIDs(t *testing.T, s *postgres.Store, f quarantine.Filter) []string {
	t.Helper()
	return walk(t, f, func(f quarantine.Filter) quarantine.MessagePage {
		q, args := postgres.ListQuery(f)
		rows, err := s.Pool().Query(t.Context(), q, args...)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var p quarantine.MessagePage
		limit := f.Limit
		if limit == 0 {
			limit = quarantine.DefaultLimit
		}
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Messages) == limit {
				last := p.Messages[limit-1]
				p.Next = quarantine.CursorOf(last)
				break
			}
			p.Messages = append(p.Messages, &quarantine.Message{ID: vals[0].(string), FailedAt: vals[18].(time.Time)})
		}
		return p
	})
}

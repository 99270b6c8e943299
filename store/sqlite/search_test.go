package sqlite

import (
	"database/sql"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// TestSearchIndexerBackground checks that the background indexer makes a
// new message searchable without any search asking for it: its document
// is written within 5 seconds, and the lag is back to zero.
func TestSearchIndexerBackground(t *testing.T) {
	t.Parallel()
	s := openTest(t)
	m := searchMsg("zebra-in-background")
	if _, err := s.InsertBatch(t.Context(), []*quarantine.Message{m}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		var n int
		if err := s.r.QueryRowContext(t.Context(), `SELECT count(*) FROM search_docs WHERE message_id = ?`, m.ID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the message is not indexed after 5 s")
		}
		<-tick.C
	}
	if lag, err := s.SearchLag(t.Context()); err != nil || lag != 0 {
		t.Fatalf("SearchLag = %v, %v after indexing, want 0", lag, err)
	}
}

// TestSearchCatchUp checks, without the background indexer, that a search
// indexes a short queue before it reads, that SearchLag measures the
// wait, and that a queue longer than a search may index is left to the
// indexer: the search then misses the queued messages until IndexSearch
// has run.
func TestSearchCatchUp(t *testing.T) {
	t.Parallel()
	s := openTest(t, WithoutSearchIndexer())
	ctx := t.Context()
	m := searchMsg("Zebra-Catch-Up")
	if _, err := s.InsertBatch(ctx, []*quarantine.Message{m}); err != nil {
		t.Fatal(err)
	}
	if lag, err := s.SearchLag(ctx); err != nil || lag <= 0 {
		t.Fatalf("SearchLag = %v, %v with a message queued, want > 0", lag, err)
	}
	p, err := s.ListMessages(ctx, quarantine.Filter{Text: "ZEBRA-catch"})
	if err != nil || len(p.Messages) != 1 || p.Messages[0].ID != m.ID {
		t.Fatalf("search after insert: %v, %v; want the message", p.Messages, err)
	}
	if lag, err := s.SearchLag(ctx); err != nil || lag != 0 {
		t.Fatalf("SearchLag = %v, %v after the search indexed the queue, want 0", lag, err)
	}

	var many []*quarantine.Message
	for i := range searchCatchUp + 1 { // more than a search indexes by itself
		many = append(many, searchMsg(fmt.Sprintf("upstream timeout %d", i)))
	}
	if _, err := s.InsertBatch(ctx, many); err != nil {
		t.Fatal(err)
	}
	p, err = s.ListMessages(ctx, quarantine.Filter{Text: "upstream timeout"})
	if err != nil || len(p.Messages) != 0 {
		t.Fatalf("search with a long queue: %d messages, %v; want none yet", len(p.Messages), err)
	}
	for {
		n, err := s.IndexSearch(ctx, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	p, err = s.ListMessages(ctx, quarantine.Filter{Text: "upstream timeout"})
	if err != nil || len(p.Messages) != quarantine.DefaultLimit {
		t.Fatalf("search after IndexSearch: %d messages, %v; want a full page", len(p.Messages), err)
	}
}

// TestTextSearchPlansAgree checks that ListMessages with text, whichever
// plan it takes (the window of the newest candidates, then the FTS5
// index), walks exactly the pages that testing every message gives.
func TestTextSearchPlansAgree(t *testing.T) {
	t.Parallel()
	s := openTest(t)
	ctx := t.Context()
	var msgs []*quarantine.Message
	for i := range textWindow + 1500 {
		m := searchMsg(fmt.Sprintf("failure %d: upstream timeout after %dms", i%101, 100+i%900))
		m.Queue = fmt.Sprintf("queue-%02d", i%20)
		m.Payload = fmt.Appendf(nil, `{"sku":"sku-%d","n":%d}`, i%1000, i)
		m.FailedAt = m.FailedAt.Add(time.Duration(i) * time.Second)
		if i < 3 {
			m.Reason += " Zebra-Needle" // only in the oldest: beyond the window
		}
		// In 1 of 25 of the newest textFirstWindow and 1 of 10 of the
		// oldest 400: the first window predicts another, which finds
		// none, and the index gives the rest.
		if n := textWindow + 1500 - i; (n <= textFirstWindow && n%25 == 0) || (i < 400 && i%10 == 0) {
			m.Reason += " Kite-Tail"
		}
		msgs = append(msgs, m)
	}
	if _, err := s.InsertBatch(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	for _, f := range []quarantine.Filter{
		{Text: "upstream TIMEOUT", Limit: 50},
		{Text: "sku-7", Limit: 20},
		{Text: "zebra-needle", Limit: 2},
		{Text: "kite-tail", Limit: 50},
		{Text: "no such thing", Limit: 10},
		{Text: "failure 7:", Queue: []string{"queue-07", "queue-08"}, Limit: 7},
		{Text: "ms", Limit: 300}, // no trigram: window after window
	} {
		got := walkIDs(t, f, func(f quarantine.Filter) quarantine.MessagePage {
			p, err := s.ListMessages(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			return p
		})
		want := walkIDs(t, f, func(f quarantine.Filter) quarantine.MessagePage {
			q, args := listQuery(f) // every candidate tested, in index order
			var p quarantine.MessagePage
			err := s.read(ctx, "list", func(tx *sql.Tx) (err error) {
				p.Messages, err = queryMessages(ctx, tx, q, args)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Messages) > f.Limit {
				p.Messages = p.Messages[:f.Limit]
				p.Next = quarantine.CursorOf(p.Messages[f.Limit-1])
			}
			return p
		})
		if !slices.Equal(got, want) {
			t.Fatalf("%q: ListMessages walked %d messages, testing every message finds %d", f.Text, len(got), len(want))
		}
		if f.Text == "zebra-needle" && len(got) != 3 {
			t.Fatalf("rare term: found %d messages, want 3", len(got))
		}
	}
}

// walkIDs follows up to 3 pages of f.
func walkIDs(t *testing.T, f quarantine.Filter, list func(quarantine.Filter) quarantine.MessagePage) []string {
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

func searchMsg(reason string) *quarantine.Message {
	at := time.Date(2025, 7, 1, 0, 0, 0, 0, time.UTC)
	return &quarantine.Message{Source: "src", SourceKind: quarantine.SourceMemory, Queue: "q", JobName: "job",
		FailureClass: quarantine.ClassPermanent, Reason: reason, Payload: []byte(`{"a":1}`), FailedAt: at, DedupeKey: reason}
}

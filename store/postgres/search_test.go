package postgres_test

import (
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/postgres"
)

// TestSearchIndexerBackground checks that the background indexer makes a
// new message searchable without any search asking for it: its document
// is written within 5 seconds, and the lag is back to zero.
func TestSearchIndexerBackground(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	m := searchMsg("zebra-in-background")
	if _, err := s.InsertBatch(t.Context(), []*quarantine.Message{m}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		var n int
		if err := s.Pool().QueryRow(t.Context(), `SELECT count(*) FROM search_docs WHERE message_id = $1`, m.ID).Scan(&n); err != nil {
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
// indexes a short queue before it reads (it sees the writes before it),
// that SearchLag measures the wait, and that a queue longer than a search
// may index is left to the indexer: the search then misses the queued
// messages until IndexSearch has run.
func TestSearchCatchUp(t *testing.T) {
	t.Parallel()
	s := openStore(t, postgres.WithoutSearchIndexer())
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

	seed(t, s, postgres.SearchCatchUp+1) // more than a search indexes by itself
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

func searchMsg(reason string) *quarantine.Message {
	at := time.Date(2025, 7, 1, 0, 0, 0, 0, time.UTC)
	return &quarantine.Message{Source: "src", SourceKind: quarantine.SourceMemory, Queue: "q", JobName: "job",
		FailureClass: quarantine.ClassPermanent, Reason: reason, Payload: []byte(`{"a":1}`), FailedAt: at, DedupeKey: reason}
}

package postgres_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

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

// TestSearchStrategiesAgree walks every page of text searches that take
// each of listText's ways (the first window, more windows, the probe
// whose hits are the answer, windows after a probe found the term
// frequent, then the whole index)
// on 20,000 seeded messages, and checks each answer against the
// documents tested one by one.
func TestSearchStrategiesAgree(t *testing.T) {
	t.Parallel()
	s := openStore(t, postgres.WithoutSearchIndexer())
	ctx := t.Context()
	seed(t, s, 20_000)
	for {
		n, err := s.IndexSearch(ctx, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	if _, err := s.Pool().Exec(ctx, `ANALYZE search_docs`); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		f    quarantine.Filter
		want int // at least this many matches, so that the case means something
	}{
		{"frequent, first window", quarantine.Filter{Text: "Upstream Timeout"}, 20_000},
		{"rare, probe", quarantine.Filter{Text: `"idem-1234"`}, 1},
		{"prefix, probe", quarantine.Filter{Text: "idem-123"}, 11},
		{"punctuation, probe", quarantine.Filter{Text: " sku-5 "}, 1},
		{"1%, windows", quarantine.Filter{Text: "failure 7:"}, 150},
		{"1% in a queue", quarantine.Filter{Text: "failure 7:", Queue: []string{"queue-08"}}, 1},
		{"frequent but not among the candidates, windows then index", quarantine.Filter{Text: "job-3", JobName: []string{"job-4"}}, 0},
		{"frequent in a status", quarantine.Filter{Text: "job-3", Status: []quarantine.Status{quarantine.StatusQuarantined}}, 1000},
		{"none", quarantine.Filter{Text: "no such text"}, 0},
	}
	for _, tc := range cases {
		// The documents tested one by one, in list order.
		q := `SELECT m.id FROM messages m JOIN search_docs d ON d.message_id = m.id WHERE d.doc LIKE $1`
		args := []any{"%" + strings.ToLower(tc.f.Text) + "%"}
		if len(tc.f.Queue) > 0 {
			q += ` AND m.queue = $2`
			args = append(args, tc.f.Queue[0])
		}
		if len(tc.f.JobName) > 0 {
			q += ` AND m.job_name = $2`
			args = append(args, tc.f.JobName[0])
		}
		if len(tc.f.Status) > 0 {
			q += ` AND m.status = $2`
			args = append(args, string(tc.f.Status[0]))
		}
		rows, err := s.Pool().Query(ctx, q+` ORDER BY m.failed_at DESC, m.id DESC`, args...)
		if err != nil {
			t.Fatal(err)
		}
		want, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		if len(want) < tc.want {
			t.Fatalf("%s: %d matches in the seed, want at least %d", tc.name, len(want), tc.want)
		}
		var got []string
		f := tc.f
		f.Limit = 50
		for page := 0; ; page++ {
			p, err := s.ListMessages(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range p.Messages {
				got = append(got, m.ID)
			}
			if p.Next == nil || page > 3 { // the first pages are enough for the frequent ones
				break
			}
			f.After = p.Next
		}
		if len(got) > len(want) || !slices.Equal(got, want[:len(got)]) || (len(got) < len(want) && len(got) < 250) {
			t.Errorf("%s: listed %d messages, want the first of %d in order\ngot  %.5q\nwant %.5q", tc.name, len(got), len(want), got, want)
		}
	}
}

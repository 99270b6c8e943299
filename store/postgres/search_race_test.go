package postgres_test

import (
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/search"
	"github.com/quarantine-dev/quarantine/store/postgres"
)

// TestSearchStaleIndexerKeepsTheNewerDocument: an indexer that took a
// message's insert entry and read the message before an edit, and writes
// its document after another indexer (here a search) folded the edit,
// does not put back the document of before the edit.
func TestSearchStaleIndexerKeepsTheNewerDocument(t *testing.T) {
	t.Parallel()
	s := openStore(t, postgres.WithoutSearchIndexer())
	ctx := t.Context()
	m := searchMsg("before the edit")
	if _, err := s.InsertBatch(ctx, []*quarantine.Message{m}); err != nil {
		t.Fatal(err)
	}
	// The stale indexer, by hand: it takes the insert's entry (locked
	// until it commits, as the indexer's own pop does) and reads the
	// message as it is now.
	stale, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stale.Rollback(ctx)
	var seq int64
	var failed time.Time
	var reason, job string
	if err := stale.QueryRow(ctx, `DELETE FROM search_pending WHERE message_id = $1 RETURNING seq`, m.ID).Scan(&seq); err != nil {
		t.Fatal(err)
	}
	if err := stale.QueryRow(ctx, `SELECT failed_at, reason, job_name FROM messages WHERE id = $1`, m.ID).Scan(&failed, &reason, &job); err != nil {
		t.Fatal(err)
	}
	// The edit commits, and a search indexes it (the entry the stale
	// indexer holds is skipped).
	if _, err := s.Pool().Exec(ctx, `UPDATE messages SET reason = 'Zebra-After-The-Edit' WHERE id = $1`, m.ID); err != nil {
		t.Fatal(err)
	}
	if n, err := s.IndexSearch(ctx, 100); err != nil || n != 1 {
		t.Fatalf("IndexSearch = %d, %v; want the edit's entry", n, err)
	}
	// The stale document is written last.
	old := search.Doc(reason, job, "")
	if _, err := stale.Exec(ctx, postgres.WriteDocsSQL, []string{m.ID}, []time.Time{failed}, []string{old}, []int64{seq}); err != nil {
		t.Fatal(err)
	}
	if err := stale.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	p, err := s.ListMessages(ctx, quarantine.Filter{Text: "zebra-after"})
	if err != nil || len(p.Messages) != 1 || p.Messages[0].ID != m.ID {
		t.Fatalf("search for the edit: %v, %v; want the message", p.Messages, err)
	}
}

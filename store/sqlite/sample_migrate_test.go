package sqlite

import (
	"database/sql"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/sampling"
)

// TestSampleMigration13 upgrades a database holding messages, some
// indexed for search and some still queued, to the side index of ranks
// (migration 0013): its backfill ranks every stored message, the entries
// queued before it carry no rank, and the samples are the ones the same
// seeds took before the upgrade.
func TestSampleMigration13(t *testing.T) {
	t.Parallel()
	s := openTest(t, WithoutSearchIndexer())
	s.sample = sampling.Limits{Exact: 20, SmallGroup: 5} // the rank method for the sets below
	ctx := t.Context()
	at := time.Date(2025, 7, 1, 0, 0, 0, 0, time.UTC)
	var msgs []*quarantine.Message
	for i := range 300 {
		msgs = append(msgs, &quarantine.Message{Source: "src", SourceKind: quarantine.SourceMemory,
			Queue: fmt.Sprintf("q%d", i%3), JobName: fmt.Sprintf("job-%d", i%7), FailureClass: quarantine.ClassPermanent,
			Reason: "boom", Payload: fmt.Appendf(nil, `{"i":%d}`, i), FailedAt: at.Add(time.Duration(i) * time.Second),
			DedupeKey: fmt.Sprint(i)})
	}
	if _, err := s.InsertBatch(ctx, msgs[:200]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.IndexSearch(ctx, 1000); err != nil {
		t.Fatal(err)
	}
	if _, err := s.InsertBatch(ctx, msgs[200:]); err != nil { // queued when the upgrade runs
		t.Fatal(err)
	}
	reqs := []quarantine.SampleRequest{
		{Size: 50, Seed: 1},
		{Size: 30, Seed: 2, Filter: quarantine.Filter{Queue: []string{"q1"}}},
		{Size: 30, Seed: 3, Filter: quarantine.Filter{Fingerprint: []string{msgs[4].Fingerprint}}},
		{Size: 30, Seed: 4, StratifyBy: quarantine.StratifyFingerprint},
	}
	take := func() [][]string {
		out := make([][]string, len(reqs))
		for i, r := range reqs {
			got, err := s.Sample(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range got {
				out[i] = append(out[i], m.ID)
			}
			slices.Sort(out[i])
		}
		return out
	}
	want := take()
	// The database as before 0013: the rank indexes on messages, no side
	// tables, queue entries without ranks.
	err := s.write(ctx, "undo 0013", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DROP TABLE sample_ranks; DROP TABLE fingerprint_ranks;
			DROP INDEX messages_fingerprint; ALTER TABLE search_pending DROP COLUMN sample_rank;
			CREATE INDEX messages_sample ON messages (sample_rank, id);
			CREATE INDEX messages_fingerprint_sample ON messages (fingerprint, sample_rank, id);
			DELETE FROM schema_migrations WHERE version = 13`)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var queued, unranked int
	if err := s.r.QueryRowContext(ctx, `SELECT count(*), count(*) FILTER (WHERE sample_rank IS NULL) FROM search_pending`).Scan(&queued, &unranked); err != nil {
		t.Fatal(err)
	}
	if queued != 100 || unranked != 100 {
		t.Fatalf("after the upgrade the queue holds %d entries, %d without a rank; want the 100 queued before it, none ranked", queued, unranked)
	}
	if got := take(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("samples after the upgrade differ from before it:\n got %v\nwant %v", got, want)
	}
	if _, err := s.IndexSearch(ctx, 1000); err != nil {
		t.Fatal(err)
	}
	if got := take(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("samples once indexed differ from before the upgrade:\n got %v\nwant %v", got, want)
	}
}

package sqlite

import (
	"database/sql"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// countMsg is a quarantined message of queue q with idempotency key key.
func countMsg(q, key string) *quarantine.Message {
	at := time.Date(2025, 7, 1, 0, 0, 0, 0, time.UTC)
	return &quarantine.Message{Source: "src", SourceKind: quarantine.SourceMemory, Queue: q, JobName: "job",
		IdempotencyKey: key, KeyRule: quarantine.KeyRuleEnvelope, FailureClass: quarantine.ClassPermanent,
		Reason: "boom", Payload: []byte(`{"a":1}`), FailedAt: at, DedupeKey: key}
}

// groupedCounts counts the items of batch id by outcome, from the items
// (what the kept counts must equal).
func groupedCounts(t *testing.T, s *Store, id string) map[quarantine.ItemOutcome]int {
	t.Helper()
	out := map[quarantine.ItemOutcome]int{}
	for _, o := range quarantine.ItemOutcomes {
		out[o] = 0
	}
	rows, err := s.r.QueryContext(t.Context(), `SELECT outcome, count(*) FROM replay_items WHERE batch_id = ? GROUP BY outcome`, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var o string
		var n int
		if err := rows.Scan(&o, &n); err != nil {
			t.Fatal(err)
		}
		out[quarantine.ItemOutcome(o)] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// wantKeptCounts fails t unless the counts GetReplay returns for each
// batch are the ones grouped from its items, and are want.
func wantKeptCounts(t *testing.T, s *Store, step string, want map[string]map[quarantine.ItemOutcome]int) {
	t.Helper()
	for id, w := range want {
		b, err := s.GetReplay(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		grouped := groupedCounts(t, s, id)
		full := map[quarantine.ItemOutcome]int{}
		for _, o := range quarantine.ItemOutcomes {
			full[o] = w[o]
		}
		if !maps.Equal(b.Counts, grouped) || !maps.Equal(grouped, full) {
			t.Fatalf("%s: batch %s kept counts %v, grouped from its items %v, want %v", step, id, b.Counts, grouped, full)
		}
	}
}

// Every way an item's outcome changes (a start's skip, results of every
// kind, a cancel, a publish recorded after the cancel, a re-failure) moves
// the kept counts as grouping the items would; migration 0011 fills them
// for the batches that were there before it.
func TestReplayCountsKept(t *testing.T) {
	t.Parallel()
	s := openTest(t)
	ctx := t.Context()
	var ms []*quarantine.Message
	for i := range 8 {
		ms = append(ms, countMsg(fmt.Sprintf("q%d", i/4), fmt.Sprintf("key-%d", i)))
	}
	if _, err := s.InsertBatch(ctx, ms); err != nil {
		t.Fatal(err)
	}
	ids := func(ms []*quarantine.Message) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.ID)
		}
		return out
	}
	req := func(ms []*quarantine.Message, dry bool) quarantine.ReplayRequest {
		return quarantine.ReplayRequest{IDs: ids(ms), Rate: 100, Reason: "fix", Actor: "alice", DryRun: dry}
	}
	type counts = map[quarantine.ItemOutcome]int
	const (
		pend, pub, dedup, fail, skip, refail = quarantine.ItemPending, quarantine.ItemPublished, quarantine.ItemDeduplicated,
			quarantine.ItemFailed, quarantine.ItemSkipped, quarantine.ItemRefailed
	)

	// A draft of four; one is discarded before the start, which its lease
	// skips.
	a, err := s.CreateReplay(ctx, req(ms[:4], true), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.CreateReplay(ctx, req(ms[4:], false), nil)
	if err != nil {
		t.Fatal(err)
	}
	wantKeptCounts(t, s, "created", map[string]counts{a.ID: {pend: 4}, b.ID: {pend: 4}})
	if _, err := s.Discard(ctx, quarantine.Discard{IDs: []string{ms[3].ID}, Reason: "junk", Actor: "bob"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ChangeReplay(ctx, quarantine.ReplayChange{BatchID: a.ID, Action: quarantine.ReplayActStart, Actor: "alice", Reason: "go"}); err != nil {
		t.Fatal(err)
	}
	wantKeptCounts(t, s, "started", map[string]counts{a.ID: {pend: 4}})

	// Results of every kind, one stale (a second record of the same lease).
	ls, err := s.LeaseReplayItems(ctx, a.ID, "engine", 4, time.Hour, 0)
	if err != nil || len(ls) != 3 {
		t.Fatalf("lease: %v, %d leases", err, len(ls))
	}
	wantKeptCounts(t, s, "leased", map[string]counts{a.ID: {pend: 3, skip: 1}})
	result := func(l quarantine.ReplayLease, o quarantine.ItemOutcome) quarantine.ReplayResult {
		return quarantine.ReplayResult{BatchID: l.Item.BatchID, MessageID: l.Item.MessageID, Fence: l.Fence, Outcome: o,
			Destination: "memory:src/q", PayloadVersion: l.Message.PayloadVersion, PayloadSHA256: l.Message.PayloadSHA256}
	}
	if _, err := s.RecordReplayResults(ctx, []quarantine.ReplayResult{result(ls[0], pub), result(ls[1], fail)}); err != nil {
		t.Fatal(err)
	}
	stale, err := s.RecordReplayResults(ctx, []quarantine.ReplayResult{result(ls[2], dedup), result(ls[0], fail)})
	if err != nil || len(stale) != 1 || stale[0] != 1 {
		t.Fatalf("record: %v, stale %v (want [1])", err, stale)
	}
	wantKeptCounts(t, s, "recorded", map[string]counts{a.ID: {pub: 1, fail: 1, dedup: 1, skip: 1}})

	// The published message comes back failing.
	again := countMsg("q0", "key-0")
	again.DedupeKey = "again"
	if _, err := s.InsertBatch(ctx, []*quarantine.Message{again}); err != nil {
		t.Fatal(err)
	}
	if again.RefailOf != ms[0].ID {
		t.Fatalf("RefailOf %q, want %s", again.RefailOf, ms[0].ID)
	}
	wantKeptCounts(t, s, "refailed", map[string]counts{a.ID: {refail: 1, fail: 1, dedup: 1, skip: 1}})

	// A cancel while two items are leased: the other two are skipped at
	// once, a publish of a leased one recorded afterwards counts as
	// published, the other stays skipped.
	ls, err = s.LeaseReplayItems(ctx, b.ID, "engine", 2, time.Hour, 0)
	if err != nil || len(ls) != 2 {
		t.Fatalf("lease: %v, %d leases", err, len(ls))
	}
	if _, err := s.ChangeReplay(ctx, quarantine.ReplayChange{BatchID: b.ID, Action: quarantine.ReplayActCancel, Actor: "alice", Reason: "stop"}); err != nil {
		t.Fatal(err)
	}
	wantKeptCounts(t, s, "cancelled", map[string]counts{b.ID: {skip: 4}})
	if stale, err := s.RecordReplayResults(ctx, []quarantine.ReplayResult{result(ls[0], pub)}); err != nil || len(stale) != 0 {
		t.Fatalf("late record: %v, stale %v", err, stale)
	}
	wantKeptCounts(t, s, "published after the cancel", map[string]counts{b.ID: {skip: 3, pub: 1}})

	// Migration 0011 on a database holding these batches (as before it:
	// no kept counts, the outcome index) fills the counts.
	err = s.write(ctx, "undo 0011", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DROP TRIGGER replay_items_outcome_moved; DROP TABLE replay_counts;
			CREATE INDEX replay_items_outcome ON replay_items (batch_id, outcome);
			DELETE FROM schema_migrations WHERE version = 11`)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	wantKeptCounts(t, s, "migrated", map[string]counts{
		a.ID: {refail: 1, fail: 1, dedup: 1, skip: 1},
		b.ID: {skip: 3, pub: 1},
	})
}

package sqlite

import (
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// groupRow is what a failure group's bucket says of its messages.
type groupRow struct {
	n           int
	first, last int64
	example     string
}

// keptGroups reads the failure-group buckets with messages, by status.
func keptGroups(t *testing.T, s *Store) map[string]groupRow {
	t.Helper()
	return readGroups(t, s, `SELECT status, n, first_failed_at, last_failed_at, example_id FROM failure_groups WHERE n > 0`)
}

// recountedGroups groups the messages themselves (one failure group in
// this test), the example by (failed_at, id).
func recountedGroups(t *testing.T, s *Store) map[string]groupRow {
	t.Helper()
	return readGroups(t, s, `SELECT status, count(*), min(failed_at), max(failed_at),
		(SELECT id FROM messages m2 WHERE m2.status = m.status ORDER BY failed_at DESC, id DESC LIMIT 1)
		FROM messages m GROUP BY status`)
}

func readGroups(t *testing.T, s *Store, q string) map[string]groupRow {
	t.Helper()
	rows, err := s.r.QueryContext(t.Context(), q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]groupRow{}
	for rows.Next() {
		var st string
		var g groupRow
		if err := rows.Scan(&st, &g.n, &g.first, &g.last, &g.example); err != nil {
			t.Fatal(err)
		}
		out[st] = g
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// A replay's status moves keep the failure groups' counts, bounds and
// example as the messages say, with messages failed at the same time
// (the example is the greatest id) and before 1970 (a negative failed_at
// still orders below every later one).
func TestReplayMovesKeepFailureGroups(t *testing.T) {
	t.Parallel()
	s := openTest(t)
	ctx := t.Context()
	at := time.Date(2025, 7, 1, 0, 0, 0, 0, time.UTC)
	times := []time.Time{at, at, at.Add(-time.Hour), time.Date(1969, 12, 31, 23, 0, 0, 0, time.UTC),
		time.Date(1969, 12, 31, 22, 0, 0, 0, time.UTC), at.Add(-2 * time.Hour)}
	var ms []*quarantine.Message
	for i, ft := range times {
		m := countMsg("q", fmt.Sprintf("key-%d", i))
		m.FailedAt = ft
		ms = append(ms, m)
	}
	if _, err := s.InsertBatch(ctx, ms); err != nil {
		t.Fatal(err)
	}
	check := func(step string, want map[string]int) {
		t.Helper()
		kept, recounted := keptGroups(t, s), recountedGroups(t, s)
		if !maps.Equal(kept, recounted) {
			t.Fatalf("%s: failure groups %+v, the messages say %+v", step, kept, recounted)
		}
		for st, n := range want {
			if kept[st].n != n {
				t.Fatalf("%s: %d %s, want %d (%+v)", step, kept[st].n, st, n, kept)
			}
		}
	}
	check("inserted", map[string]int{"quarantined": 6})
	// Both ties, both before 1970 and one later message move; the other
	// later one stays.
	b, err := s.CreateReplay(ctx, quarantine.ReplayRequest{IDs: []string{ms[0].ID, ms[1].ID, ms[3].ID, ms[4].ID, ms[5].ID},
		Rate: 100, Reason: "fix", Actor: "alice"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	check("started", map[string]int{"quarantined": 6}) // a pin moves nothing
	ls, err := s.LeaseReplayItems(ctx, b.ID, "engine", 5, time.Hour, 0)
	if err != nil || len(ls) != 5 {
		t.Fatalf("lease: %v, %d leases", err, len(ls))
	}
	check("leased", map[string]int{"quarantined": 6}) // a lease moves nothing: the record does
	var rs []quarantine.ReplayResult
	for _, l := range ls {
		// Both ties and both before 1970 move to replayed: its example is
		// the greater id of the ties.
		o := quarantine.ItemFailed // stays quarantined
		if l.Item.MessageID != ms[5].ID {
			o = quarantine.ItemPublished
		}
		rs = append(rs, quarantine.ReplayResult{BatchID: b.ID, MessageID: l.Item.MessageID, Fence: l.Fence, Outcome: o,
			Destination: "memory:src/q", PayloadVersion: l.Message.PayloadVersion, PayloadSHA256: l.Message.PayloadSHA256})
	}
	if _, err := s.RecordReplayResults(ctx, rs); err != nil {
		t.Fatal(err)
	}
	check("recorded", map[string]int{"quarantined": 2, "replayed": 4})
	if g, want := keptGroups(t, s)["replayed"], max(ms[0].ID, ms[1].ID); g.example != want {
		t.Fatalf("replayed example %s, want %s (the greater id failed at %s)", g.example, want, at)
	}
}

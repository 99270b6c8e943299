package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/postgres"
)

// groupRow is one bucket of failure_groups with messages in it.
type groupRow struct {
	fingerprint, queue, owner, status string
	n                                 int64
	first, last                       time.Time
	example                           string
}

// keptGroups reads the non-empty buckets of failure_groups in key order;
// with recount, as quarantine_recount rebuilds them from messages (in a
// transaction rolled back).
func keptGroups(t *testing.T, s *postgres.Store, recount bool) []groupRow {
	t.Helper()
	ctx := context.Background()
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if recount {
		if _, err := tx.Exec(ctx, `SELECT quarantine_recount()`); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := tx.Query(ctx, `SELECT fingerprint, queue, owner, status, n, first_failed_at, last_failed_at, example_id
		FROM failure_groups WHERE n > 0 ORDER BY 1, 2, 3, 4`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (g groupRow, err error) {
		err = r.Scan(&g.fingerprint, &g.queue, &g.owner, &g.status, &g.n, &g.first, &g.last, &g.example)
		g.first, g.last = g.first.UTC(), g.last.UTC()
		return g, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestGroupBoundsRecountExact takes the bounds (first, last, example) of
// failure-group buckets away by status changes, one statement at a time,
// and checks after each that the kept buckets are what a recount from
// messages gives. Bucket "rare" is a small part of its queue and status:
// 150 messages of bucket "wide" fail before all of its own and 150 after,
// so that its bounds are not among the 100 messages of the queue and
// status nearest to them and the trigger reads the whole bucket; the
// bounds of "wide" are among them.
func TestGroupBoundsRecountExact(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	ctx := context.Background()
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	var msgs []*quarantine.Message
	add := func(reason string, at time.Time) {
		k := fmt.Sprintf("k%04d", len(msgs))
		msgs = append(msgs, &quarantine.Message{Source: "src", Queue: "orders", JobName: "charge", IdempotencyKey: "i-" + k,
			Reason: reason, Payload: []byte(`{}`), DedupeKey: k, FailedAt: at})
	}
	for i := range 150 {
		add("wide failure", base.Add(time.Duration(i)*time.Second))
	}
	for i := range 16 {
		// Two share a failure time: the example is the larger id of them.
		add("rare failure", base.Add(time.Hour+time.Duration(i/2*2)*time.Minute))
	}
	for i := range 150 {
		add("wide failure", base.Add(2*time.Hour+time.Duration(i)*time.Second))
	}
	if _, err := s.InsertBatch(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	if got, want := keptGroups(t, s, false), keptGroups(t, s, true); !slices.Equal(got, want) {
		t.Fatalf("after the insert: kept %+v, recounted %+v", got, want)
	}
	// Each step moves the messages at the bounds of a bucket, as they are
	// then: the first, the last and the example of "rare" and of "wide".
	for step := range 8 {
		var fp string
		if err := s.Pool().QueryRow(ctx, `SELECT fingerprint FROM messages WHERE reason = $1 LIMIT 1`,
			[]string{"rare failure", "wide failure"}[step%2]).Scan(&fp); err != nil {
			t.Fatal(err)
		}
		to := []string{"discarded", "replaying", "discarded", "replaying"}[step/2%4]
		tag, err := s.Pool().Exec(ctx, `UPDATE messages SET status = $2, updated_at = now()
			WHERE id IN (SELECT example_id FROM failure_groups WHERE fingerprint = $1 AND status = 'quarantined' AND n > 0
				UNION SELECT m.id FROM messages m JOIN failure_groups g ON g.fingerprint = m.fingerprint AND g.queue = m.queue
					AND g.owner = m.owner AND g.status = m.status
				WHERE g.fingerprint = $1 AND g.status = 'quarantined' AND m.failed_at IN (g.first_failed_at, g.last_failed_at))`,
			fp, to)
		if err != nil {
			t.Fatal(err)
		}
		if tag.RowsAffected() == 0 {
			t.Fatalf("step %d: no bound moved", step)
		}
		if got, want := keptGroups(t, s, false), keptGroups(t, s, true); !slices.Equal(got, want) {
			t.Fatalf("step %d (%d moved to %s): kept %+v, recounted %+v", step, tag.RowsAffected(), to, got, want)
		}
	}
}

// TestDiscardChunksLeaveLastBoundsLater runs a discard operation newest
// first, a chunk at a time: a chunk takes the last message of its
// bucket, and leaves the last bound and the example for the end of the
// operation (migration 0023) while the counts and first bounds stay
// exact; when the operation fails (as when it completes), every bound is
// exact again, a status change made meanwhile outside a chunk included.
func TestDiscardChunksLeaveLastBoundsLater(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	ctx := context.Background()
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	var msgs []*quarantine.Message
	for i := range 10 {
		k := fmt.Sprintf("k%04d", i)
		msgs = append(msgs, &quarantine.Message{Source: "src", Queue: "orders", JobName: "charge", IdempotencyKey: "i-" + k,
			Reason: "one failure", Payload: []byte(`{}`), DedupeKey: k, FailedAt: base.Add(time.Duration(i) * time.Minute)})
	}
	if _, err := s.InsertBatch(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	n := len(msgs)
	op, err := s.StartDiscard(ctx, quarantine.Discard{Filter: &quarantine.Filter{}, ExpectCount: &n, Reason: "incident", Actor: "bob"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if op, _, err = s.DiscardChunk(ctx, op.ID, 3); err != nil || op.State != quarantine.DiscardRunning || op.Discarded != 3 {
		t.Fatalf("first chunk: %+v, %v", op, err)
	}
	kept, recounted := keptGroups(t, s, false), keptGroups(t, s, true)
	if len(kept) != 2 || len(recounted) != 2 {
		t.Fatalf("after a chunk: kept %+v, recounted %+v; want the quarantined and the discarded bucket", kept, recounted)
	}
	for i := range kept {
		k, r := kept[i], recounted[i]
		if k.status != r.status || k.n != r.n || !k.first.Equal(r.first) {
			t.Fatalf("after a chunk: kept %+v, recounted %+v: counts and first bounds must be exact", k, r)
		}
	}
	if q := kept[1]; q.status != "quarantined" || q.example != msgs[9].ID || !q.last.Equal(msgs[9].FailedAt) {
		t.Fatalf("after a chunk of the newest: quarantined bucket %+v, want its last bound left for later (%s)", q, msgs[9].ID)
	}
	// Outside a chunk: the first bound of the bucket moves.
	if _, err := s.Pool().Exec(ctx, `UPDATE messages SET status = 'replaying' WHERE id = $1`, msgs[0].ID); err != nil {
		t.Fatal(err)
	}
	if err := s.FailDiscard(ctx, op.ID, "stopped by the test"); err != nil {
		t.Fatal(err)
	}
	if got, want := keptGroups(t, s, false), keptGroups(t, s, true); !slices.Equal(got, want) {
		t.Fatalf("after the operation failed: kept %+v, recounted %+v", got, want)
	}
}

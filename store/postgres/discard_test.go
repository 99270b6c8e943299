package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// TestDiscardCursorOfAnEarlierVersion: an operation that an earlier
// version left running walked its set by id and saved the last id as its
// cursor; this version goes on from there by id, so the messages before
// the cursor stay as they were and every other one is discarded once.
func TestDiscardCursorOfAnEarlierVersion(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	ctx := context.Background()
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	var msgs []*quarantine.Message
	for i := range 7 {
		k := fmt.Sprintf("k%04d", i)
		// Failure times against the insert order: newest first would
		// walk them the other way round.
		msgs = append(msgs, &quarantine.Message{Source: "src", Queue: "orders", JobName: "charge", IdempotencyKey: "i-" + k,
			Reason: "one failure", Payload: []byte(`{}`), DedupeKey: k, FailedAt: base.Add(-time.Duration(i) * time.Minute)})
	}
	if _, err := s.InsertBatch(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	var ids []string
	rows, err := s.Pool().Query(ctx, `SELECT id FROM messages ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if rows.Close(); rows.Err() != nil || len(ids) != len(msgs) {
		t.Fatalf("ids %v, %v", ids, rows.Err())
	}
	n := len(msgs)
	op, err := s.StartDiscard(ctx, quarantine.Discard{Filter: &quarantine.Filter{}, ExpectCount: &n, Reason: "incident", Actor: "bob"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	// As the earlier version saved it after a chunk of the first two ids.
	if _, err := s.Pool().Exec(ctx, `UPDATE discard_operations SET cursor = $2, discarded = 2 WHERE id = $1`, op.ID, ids[1]); err != nil {
		t.Fatal(err)
	}
	var changed []string
	for chunks := 0; op.State == quarantine.DiscardRunning; chunks++ {
		if chunks > n {
			t.Fatal("the operation does not end")
		}
		var res quarantine.BulkResult
		if op, res, err = s.DiscardChunk(ctx, op.ID, 2); err != nil {
			t.Fatal(err)
		}
		changed = append(changed, res.Changed...)
	}
	if want := ids[2:]; !slices.Equal(changed, want) {
		t.Fatalf("discarded %v, want %v in id order after the cursor", changed, want)
	}
	if op.State != quarantine.DiscardCompleted || op.Discarded != int64(n) {
		t.Fatalf("operation %+v, want completed with %d discarded", op, n)
	}
	var left int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM messages WHERE status = 'quarantined' AND id <= $1`, ids[1]).Scan(&left); err != nil || left != 2 {
		t.Fatalf("%d messages up to the cursor still quarantined, %v; want 2", left, err)
	}
}

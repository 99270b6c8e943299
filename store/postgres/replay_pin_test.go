package postgres_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/replays"
	"github.com/quarantine-dev/quarantine/store/postgres"
)

// A pin abandoned after its chunks were written (its server stopped
// before it settled) is removed whole by the next engine: its items,
// their counts and the batch (replay_counts references the batch, so it
// goes last).
func TestAbandonedPinRemovedWithItsItems(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openStore(t)
	const n = 5000 // more than one transaction's worth (ops.Chunk)
	insertOrders(t, s, n)
	b, err := s.CreateReplay(ctx, quarantine.ReplayRequest{Filter: &quarantine.Filter{}, Rate: 10, DryRun: true, Reason: "test", Actor: "alice"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b.Total != n {
		t.Fatalf("pinned %d, want %d", b.Total, n)
	}
	// As if the server had stopped before the last transaction.
	if _, err := s.Pool().Exec(ctx, `UPDATE replay_batches SET state = 'pinning', updated_at = $2 WHERE id = $1`,
		b.ID, time.Now().Add(-2*replays.PinStale)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RunnableReplays(ctx, time.Now()); err != nil {
		t.Fatalf("RunnableReplays (removing the abandoned pin): %v", err)
	}
	if _, err := s.GetReplay(ctx, b.ID); quarantine.ErrorCode(err) != quarantine.ENOTFOUND {
		t.Fatalf("GetReplay of the abandoned pin: %v, want ENOTFOUND", err)
	}
	for _, table := range []string{"replay_items", "replay_counts"} {
		var n int
		if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM `+table+` WHERE batch_id = $1`, b.ID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("%d rows of %s left for the removed pin", n, table)
		}
	}
}

// insertOrders stores n quarantined messages of queue orders.
func insertOrders(t *testing.T, s *postgres.Store, n int) {
	t.Helper()
	for lo := 0; lo < n; lo += 1000 {
		var ms []*quarantine.Message
		for i := lo; i < lo+1000; i++ {
			ms = append(ms, &quarantine.Message{
				Source: "rmq", SourceKind: quarantine.SourceRabbitMQ, Queue: "orders", JobName: "charge",
				MessageID: fmt.Sprintf("m-%d", i), IdempotencyKey: fmt.Sprintf("key-%d", i), KeyRule: quarantine.KeyRuleEnvelope,
				FailureClass: quarantine.ClassExhausted, Reason: "timeout", Payload: []byte(`{}`),
				ContentType: "application/json", DedupeKey: fmt.Sprintf("d-%d", i),
			})
		}
		if _, err := s.InsertBatch(t.Context(), ms); err != nil {
			t.Fatal(err)
		}
	}
}

// A pin cancelled while its chunks are being written, two at a time:
// every chunk either committed before the cancel (its items skipped
// "cancelled") or rolled back; the batch's total is exactly its items.
func TestPinCancelledMidway(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openStore(t)
	const n = 4 * replays.PinChunk
	insertOrders(t, s, n)
	var id string
	cancelled := make(chan error, 1)
	r := quarantine.ReplayRequest{Filter: &quarantine.Filter{}, Rate: 10, DryRun: true, Reason: "test", Actor: "alice"}
	r.OnPinning = func(b *quarantine.ReplayBatch) {
		id = b.ID
		go func() {
			for {
				got, err := s.GetReplay(ctx, b.ID)
				if err != nil {
					cancelled <- err
					return
				}
				if got.Total > 0 {
					_, err := s.ChangeReplay(ctx, quarantine.ReplayChange{BatchID: b.ID, Action: quarantine.ReplayActCancel, Actor: "bob", Reason: "wrong filter"})
					cancelled <- err
					return
				}
				time.Sleep(time.Millisecond)
			}
		}()
	}
	_, err := s.CreateReplay(ctx, r, nil)
	if cerr := <-cancelled; cerr != nil {
		t.Fatalf("cancel: %v", cerr)
	}
	if err == nil {
		t.Skip("the pin settled before the cancel came")
	}
	if quarantine.ErrorCode(err) != quarantine.ECONFLICT {
		t.Fatalf("CreateReplay of a pin cancelled midway: %v, want ECONFLICT", err)
	}
	got, err := s.GetReplay(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var items, skipped int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE outcome = 'skipped' AND reason = 'cancelled')
		FROM replay_items WHERE batch_id = $1`, id).Scan(&items, &skipped); err != nil {
		t.Fatal(err)
	}
	if got.State != quarantine.ReplayCancelled || got.Total == 0 || got.Total >= n || got.Total%replays.PinChunk != 0 ||
		items != got.Total || skipped != items || got.Counts[quarantine.ItemSkipped] != items {
		t.Fatalf("cancelled midway: state %s, total %d of %d, counts %v; %d items, %d skipped as cancelled",
			got.State, got.Total, n, got.Counts, items, skipped)
	}
}

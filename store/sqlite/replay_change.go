package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/replays"
)

// replayTx is one transaction of the store, as the shared replay flows
// (store/internal/replays) use it.
type replayTx struct {
	s  *Store
	tx *sql.Tx
}

var _ replays.Tx = replayTx{}

func (t replayTx) GetBatch(ctx context.Context, id string) (*quarantine.ReplayBatch, error) {
	return getBatch(ctx, t.tx, id)
}

func (t replayTx) FillCounts(ctx context.Context, b *quarantine.ReplayBatch) error {
	return fillCounts(ctx, t.tx, []*quarantine.ReplayBatch{b})
}

func (t replayTx) AppendAudits(ctx context.Context, events []*quarantine.AuditEvent) error {
	return t.s.appendAudits(ctx, t.tx, events)
}

func (t replayTx) CountPending(ctx context.Context, batchID string) (int, error) {
	var n int
	err := t.tx.QueryRowContext(ctx, `SELECT count(*) FROM replay_items WHERE batch_id = ? AND outcome = 'pending'`, batchID).Scan(&n)
	return n, err
}

// CancelItems skips the pending items of a batch ("cancelled"), which
// ends their hold on their messages (replays.InFlight), and with release
// returns their messages that an older version moved to replaying to
// quarantined. Items whose
// lease has expired get a new fence, so that a late result is refused;
// an item whose lease is live keeps it, and a publish its engine records
// afterwards is recorded (the message was published: replayed it is).
func (t replayTx) CancelItems(ctx context.Context, batchID string, release bool, now time.Time) error {
	if release {
		var ids string
		// Only a leased item of an older version moved its message to
		// replaying (an item never leased left it as it was: quarantined,
		// or another batch's).
		if err := t.tx.QueryRowContext(ctx, `SELECT json_group_array(message_id) FROM replay_items
			WHERE batch_id = ? AND outcome = 'pending' AND attempts > 0`, batchID).Scan(&ids); err != nil {
			return err
		}
		if err := moveStatus(ctx, t.tx, ids, "replaying", "quarantined", "", micros(now)); err != nil {
			return err
		}
	}
	live := `lease_owner <> '' AND lease_expires_at > :now`
	_, err := t.tx.ExecContext(ctx, `UPDATE replay_items SET outcome = 'skipped', reason = 'cancelled',
		fence = CASE WHEN `+live+` THEN fence ELSE fence + 1 END,
		lease_owner = CASE WHEN `+live+` THEN lease_owner ELSE '' END,
		lease_expires_at = CASE WHEN `+live+` THEN lease_expires_at END,
		updated_at = :now
		WHERE batch_id = :batch AND outcome = 'pending'`, sql.Named("now", micros(now)), sql.Named("batch", batchID))
	return err
}

// completeIfDone completes the running batch id when none of its items is
// pending, returning the event to append (nil when it did nothing).
func completeIfDone(ctx context.Context, tx *sql.Tx, id string, now time.Time) (*quarantine.AuditEvent, error) {
	var pending bool
	if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM replay_items WHERE batch_id = ? AND outcome = 'pending')`, id).Scan(&pending); err != nil || pending {
		return nil, err
	}
	b, err := getBatch(ctx, tx, id)
	if err != nil || b.State != quarantine.ReplayRunning || b.Counts[quarantine.ItemPending] > 0 {
		return nil, err
	}
	ev := replays.Finish(b, now)
	if err := (replayTx{tx: tx}).SaveBatch(ctx, b); err != nil {
		return nil, err
	}
	return ev, nil
}

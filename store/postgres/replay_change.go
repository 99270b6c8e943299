package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/replays"
)

// replayTx is one transaction of the store, as the shared replay flows
// (store/internal/replays) use it.
type replayTx struct {
	s  *Store
	tx pgx.Tx
}

var _ replays.Tx = replayTx{}

// GetBatch reads the batch id locked (lockClause).
func (t replayTx) GetBatch(ctx context.Context, id string) (*quarantine.ReplayBatch, error) {
	return getBatch(ctx, t.tx, id, lockClause)
}

func (t replayTx) FillCounts(ctx context.Context, b *quarantine.ReplayBatch) error {
	return fillCounts(ctx, t.tx, []*quarantine.ReplayBatch{b})
}

func (t replayTx) AppendAudits(ctx context.Context, events []*quarantine.AuditEvent) error {
	return t.s.appendAudits(ctx, t.tx, events)
}

func (t replayTx) CountPending(ctx context.Context, batchID string) (int, error) {
	var n int
	err := t.tx.QueryRow(ctx, `SELECT count(*) FROM replay_items WHERE batch_id = $1 AND outcome = 'pending'`, batchID).Scan(&n)
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
	// An item whose lease is live keeps it: the engine holding it may be
	// publishing it now, and what it publishes is recorded.
	// The items are locked in seq order first, the order a record locks
	// its items in (a record does not lock the batch): a cancel and a
	// record wait for each other, never both.
	rows, err := t.tx.Query(ctx, `WITH c AS (SELECT seq FROM replay_items WHERE batch_id = $1 AND outcome = 'pending'
			ORDER BY seq FOR UPDATE)
		UPDATE replay_items i SET outcome = 'skipped', reason = 'cancelled',
		fence = CASE WHEN i.lease_owner <> '' AND i.lease_expires_at > $2 THEN i.fence ELSE i.fence + 1 END,
		lease_owner = CASE WHEN i.lease_owner <> '' AND i.lease_expires_at > $2 THEN i.lease_owner ELSE '' END,
		lease_expires_at = CASE WHEN i.lease_owner <> '' AND i.lease_expires_at > $2 THEN i.lease_expires_at END,
		updated_at = $2
		FROM c WHERE i.batch_id = $1 AND i.seq = c.seq AND i.outcome = 'pending'
		RETURNING CASE WHEN i.attempts > 0 THEN i.message_id END`, batchID, now)
	if err != nil {
		return err
	}
	// Only a leased item of an older version moved its message to
	// replaying (an item never leased left it as it was: quarantined, or
	// another batch's).
	var ids []string
	var id *string
	_, err = pgx.ForEachRow(rows, []any{&id}, func() error {
		if id != nil {
			ids = append(ids, *id)
		}
		return nil
	})
	if err != nil || !release || len(ids) == 0 {
		return err
	}
	_, err = t.tx.Exec(ctx, `UPDATE messages SET status = 'quarantined', updated_at = $2
		WHERE id IN (SELECT id FROM messages WHERE id = ANY($1::text[]) AND status = 'replaying' ORDER BY id FOR UPDATE)`,
		ids, now)
	return err
}

// completeIfDone completes batch id when it is running and none of its
// items is pending, in a transaction of its own that locks the batch (a
// cancel or a pause may be on its way); a pending count read first, not
// locking anything, spares the lock while items are left.
func (s *Store) completeIfDone(ctx context.Context, id string) error {
	var pending bool
	if err := s.pool.QueryRow(ctx, pendingLeftSQL, id).Scan(&pending); err != nil {
		return translate(err, "complete a replay")
	}
	if pending {
		return nil
	}
	return s.inTx(ctx, "complete a replay", func(tx pgx.Tx) error {
		b, err := getBatch(ctx, tx, id, lockClause)
		if quarantine.ErrorCode(err) == quarantine.ENOTFOUND {
			return nil
		}
		if err != nil || b.State != quarantine.ReplayRunning || b.Counts[quarantine.ItemPending] > 0 {
			return err
		}
		ev := replays.Finish(b, s.clock())
		if err := (replayTx{s, tx}).SaveBatch(ctx, b); err != nil {
			return err
		}
		return s.appendAudits(ctx, tx, []*quarantine.AuditEvent{ev})
	})
}

// pendingLeftSQL says whether items of a batch are pending.
const pendingLeftSQL = `SELECT coalesce(sum(n), 0) > 0 FROM replay_counts WHERE batch_id = $1 AND outcome = 'pending'`

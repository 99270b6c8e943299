package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/replays"
)

// ChangeReplay applies c.Action to its batch; see store.Replays. Errors:
// EINVALID for an unknown action, ENOTFOUND for an unknown batch,
// ECONFLICT when the batch's state does not allow the action, when a
// draft expired before its start (it is expired, committed) or when a
// complete finds pending items, EUNAVAILABLE.
func (s *Store) ChangeReplay(ctx context.Context, c quarantine.ReplayChange) (*quarantine.ReplayBatch, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	var b *quarantine.ReplayBatch
	var expired bool
	err := s.write(ctx, "change a replay", func(tx *sql.Tx) (err error) {
		b, expired, err = replays.Change(ctx, replayTx{s, tx}, c, s.clock())
		return err
	})
	if err != nil {
		return nil, err
	}
	if expired {
		return nil, replays.ErrDraftExpired
	}
	return b, nil
}

// replayTx is one transaction of the store, as the shared replay flows
// (store/internal/replays) use it.
type replayTx struct {
	s  *Store
	tx *sql.Tx
}

var _ replays.Tx = replayTx{}

func (t replayTx) InsertBatch(ctx context.Context, b *quarantine.ReplayBatch) error {
	return insertReplayBatch(ctx, t.tx, b)
}

func (t replayTx) InsertItems(ctx context.Context, batchID string, items []quarantine.ReplayItem) error {
	return insertItems(ctx, t.tx, batchID, items)
}

func (t replayTx) DeleteBatch(ctx context.Context, batchID string) error {
	return deleteBatch(ctx, t.tx, batchID)
}

func (t replayTx) CheckIncident(ctx context.Context, g *quarantine.IncidentGuard, b *quarantine.ReplayBatch, force bool, now time.Time) error {
	return checkIncident(ctx, t.tx, g, b, force, now)
}

func (t replayTx) SavePin(ctx context.Context, b *quarantine.ReplayBatch) (bool, error) {
	return savePin(ctx, t.tx, b)
}

func (t replayTx) GetBatch(ctx context.Context, id string) (*quarantine.ReplayBatch, error) {
	return getBatch(ctx, t.tx, id)
}

func (t replayTx) SaveBatch(ctx context.Context, b *quarantine.ReplayBatch) error {
	return saveBatch(ctx, t.tx, b)
}

func (t replayTx) FillCounts(ctx context.Context, b *quarantine.ReplayBatch) error {
	return fillCounts(ctx, t.tx, []*quarantine.ReplayBatch{b})
}

func (t replayTx) CancelItems(ctx context.Context, batchID string, release bool, now time.Time) error {
	return cancelItems(ctx, t.tx, batchID, release, now)
}

func (t replayTx) CountPending(ctx context.Context, batchID string) (int, error) {
	return countPending(ctx, t.tx, batchID)
}

func (t replayTx) AppendAudits(ctx context.Context, events []*quarantine.AuditEvent) error {
	return t.s.appendAudits(ctx, t.tx, events)
}

func countPending(ctx context.Context, tx *sql.Tx, batchID string) (int, error) {
	var n int
	err := tx.QueryRowContext(ctx, `SELECT count(*) FROM replay_items WHERE batch_id = ? AND outcome = 'pending'`, batchID).Scan(&n)
	return n, err
}

// cancelItems skips the pending items of a batch ("cancelled") and with
// release returns their (replaying) messages to quarantined. Items whose
// lease has expired get a new fence, so that a late result is refused;
// an item whose lease is live keeps it, and a publish its engine records
// afterwards is recorded (the message was published: replayed it is).
func cancelItems(ctx context.Context, tx *sql.Tx, batchID string, release bool, now time.Time) error {
	if release {
		var ids string
		// Only a leased item moved its message to replaying (an item never
		// leased left it as it was: quarantined, or another batch's).
		if err := tx.QueryRowContext(ctx, `SELECT json_group_array(message_id) FROM replay_items
			WHERE batch_id = ? AND outcome = 'pending' AND attempts > 0`, batchID).Scan(&ids); err != nil {
			return err
		}
		if err := moveStatus(ctx, tx, ids, "replaying", "quarantined", "", micros(now)); err != nil {
			return err
		}
	}
	live := `lease_owner <> '' AND lease_expires_at > :now`
	_, err := tx.ExecContext(ctx, `UPDATE replay_items SET outcome = 'skipped', reason = 'cancelled',
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
	if err := saveBatch(ctx, tx, b); err != nil {
		return nil, err
	}
	return ev, nil
}

// SetReplayCanary records the canary's verdict; see store.Replays.
// Errors: EINVALID for an unknown verdict, ENOTFOUND, EUNAVAILABLE.
func (s *Store) SetReplayCanary(ctx context.Context, batchID, verdict string, until *time.Time) (*quarantine.ReplayBatch, error) {
	if !replays.ValidVerdict(verdict) {
		return nil, quarantine.FieldErrorf(quarantine.EINVALID, "canary_verdict", "unknown canary verdict %q", quarantine.Clip(verdict))
	}
	var b *quarantine.ReplayBatch
	err := s.write(ctx, "record a canary verdict", func(tx *sql.Tx) error {
		var err error
		if b, err = getBatch(ctx, tx, batchID); err != nil || b.CanaryVerdict == verdict {
			return err
		}
		b.CanaryVerdict, b.CanaryUntil, b.UpdatedAt = verdict, nil, s.clock()
		if until != nil {
			u := until.UTC().Truncate(time.Microsecond)
			b.CanaryUntil = &u
		}
		return saveBatch(ctx, tx, b)
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

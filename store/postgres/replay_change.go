package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/replays"
)

// errDraftExpired is what a start of an expired draft returns, after the
// transaction that expired it committed.
var errDraftExpired = quarantine.Errorf(quarantine.ECONFLICT, "the draft expired")

// ChangeReplay applies c.Action to its batch, locked first; see
// store.Replays. Errors: EINVALID for an unknown action, ENOTFOUND for an
// unknown batch, ECONFLICT when the batch's state does not allow the
// action, when a draft expired before its start (it is expired,
// committed) or when a complete finds pending items, EUNAVAILABLE.
func (s *Store) ChangeReplay(ctx context.Context, c quarantine.ReplayChange) (*quarantine.ReplayBatch, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	var b *quarantine.ReplayBatch
	var expired bool
	err := s.inTx(ctx, "change a replay", func(tx pgx.Tx) error {
		var err error
		expired = false
		if b, err = getBatch(ctx, tx, c.BatchID, lockClause); err != nil {
			return err
		}
		from := b.State
		to, act, err := quarantine.ReplayTransition(from, c.Action)
		if err != nil {
			return err
		}
		now := s.clock()
		if c.Action == quarantine.ReplayActStart && replays.Expired(b, now) {
			expired = true
			replays.Move(b, quarantine.ReplayExpired, errDraftExpired.Message, now)
			if err := saveBatch(ctx, tx, b); err != nil {
				return err
			}
			return s.appendAudits(ctx, tx, []*quarantine.AuditEvent{replays.ChangeEvent(replays.SystemActor,
				quarantine.ActionReplayExpire, b.ID, errDraftExpired.Message, from, quarantine.ReplayExpired)})
		}
		events := []*quarantine.AuditEvent{replays.ChangeEvent(c.Actor, act, b.ID, c.Reason, from, to)}
		switch c.Action {
		case quarantine.ReplayActStart:
			if err := startItems(ctx, tx, b.ID, now); err != nil {
				return err
			}
			if err := checkIncident(ctx, tx, c.Guard, b, c.Force, now); err != nil {
				return err
			}
			if f := replays.ForceEvent(c.Actor, b.ID, c.Reason, false, c.Force, c.AcceptKeyRuleChange); f != nil {
				events = append(events, f)
			}
		case quarantine.ReplayActCancel:
			if err := cancelItems(ctx, tx, b.ID, from != quarantine.ReplayDraft, now); err != nil {
				return err
			}
		case quarantine.ReplayActComplete:
			n, err := countPending(ctx, tx, b.ID)
			if err != nil {
				return err
			}
			if n > 0 {
				return quarantine.Errorf(quarantine.ECONFLICT, "the replay still has %d pending items", n)
			}
		}
		replays.Move(b, to, c.Reason, now)
		if to == quarantine.ReplayRunning {
			n, err := countPending(ctx, tx, b.ID)
			if err != nil {
				return err
			}
			if n == 0 {
				replays.Move(b, quarantine.ReplayCompleted, c.Reason, now)
				events = append(events, replays.CompleteEvent(b))
			}
		}
		if err := saveBatch(ctx, tx, b); err != nil {
			return err
		}
		if err := fillCounts(ctx, tx, []*quarantine.ReplayBatch{b}); err != nil {
			return err
		}
		return s.appendAudits(ctx, tx, events)
	})
	if err != nil {
		return nil, err
	}
	if expired {
		return nil, errDraftExpired
	}
	return b, nil
}

func countPending(ctx context.Context, tx pgx.Tx, batchID string) (int, error) {
	var n int
	err := tx.QueryRow(ctx, `SELECT count(*) FROM replay_items WHERE batch_id = $1 AND outcome = 'pending'`, batchID).Scan(&n)
	return n, err
}

// startItems locks the messages of the pending items (id order), skips
// each item whose message is no longer quarantined
// (quarantine.StartSkipReason) and moves the others' messages to
// replaying.
func startItems(ctx context.Context, tx pgx.Tx, batchID string, now time.Time) error {
	rows, err := tx.Query(ctx, `SELECT seq, message_id FROM replay_items
		WHERE batch_id = $1 AND outcome = 'pending' ORDER BY seq`, batchID)
	if err != nil {
		return err
	}
	type pending struct {
		seq int32
		id  string
	}
	var items []pending
	var p pending
	if _, err := pgx.ForEachRow(rows, []any{&p.seq, &p.id}, func() error {
		items = append(items, p)
		return nil
	}); err != nil || len(items) == 0 {
		return err
	}
	ids := make([]string, len(items))
	for i, it := range items {
		ids[i] = it.id
	}
	rows, err = tx.Query(ctx, `SELECT id, status FROM messages WHERE id = ANY($1::text[]) ORDER BY id FOR UPDATE`, ids)
	if err != nil {
		return err
	}
	status := map[string]quarantine.Status{}
	var id string
	var st quarantine.Status
	if _, err := pgx.ForEachRow(rows, []any{&id, &st}, func() error {
		status[id] = st
		return nil
	}); err != nil {
		return err
	}
	var skipSeq []int32
	var skipWhy, start []string
	for _, it := range items {
		st, ok := status[it.id]
		if why := quarantine.StartSkipReason(ok, st); why != "" {
			skipSeq, skipWhy = append(skipSeq, it.seq), append(skipWhy, why)
		} else {
			start = append(start, it.id)
		}
	}
	if len(skipSeq) > 0 {
		if _, err := tx.Exec(ctx, `UPDATE replay_items i SET outcome = 'skipped', reason = u.reason, updated_at = $4
			FROM unnest($2::int[], $3::text[]) AS u(seq, reason) WHERE i.batch_id = $1 AND i.seq = u.seq`,
			batchID, skipSeq, skipWhy, now); err != nil {
			return err
		}
	}
	return setReplaying(ctx, tx, start, now)
}

// cancelItems skips the pending items of a batch ("cancelled") and with
// release returns their (replaying) messages to quarantined. Items whose
// lease has expired get a new fence, so that a late result is refused;
// an item whose lease is live keeps it, and a publish its engine records
// afterwards is recorded (the message was published: replayed it is).
func cancelItems(ctx context.Context, tx pgx.Tx, batchID string, release bool, now time.Time) error {
	// An item whose lease is live keeps it: the engine holding it may be
	// publishing it now, and what it publishes is recorded.
	rows, err := tx.Query(ctx, `UPDATE replay_items SET outcome = 'skipped', reason = 'cancelled',
		fence = CASE WHEN lease_owner <> '' AND lease_expires_at > $2 THEN fence ELSE fence + 1 END,
		lease_owner = CASE WHEN lease_owner <> '' AND lease_expires_at > $2 THEN lease_owner ELSE '' END,
		lease_expires_at = CASE WHEN lease_owner <> '' AND lease_expires_at > $2 THEN lease_expires_at END,
		updated_at = $2
		WHERE batch_id = $1 AND outcome = 'pending' RETURNING message_id`, batchID, now)
	if err != nil {
		return err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || !release || len(ids) == 0 {
		return err
	}
	_, err = tx.Exec(ctx, `UPDATE messages SET status = 'quarantined', updated_at = $2
		WHERE id IN (SELECT id FROM messages WHERE id = ANY($1::text[]) AND status = 'replaying' ORDER BY id FOR UPDATE)`,
		ids, now)
	return err
}

// completeIfDone completes the running batch id (locked by the caller)
// when none of its items is pending, returning the event to append (nil
// when it did nothing).
func completeIfDone(ctx context.Context, tx pgx.Tx, id string, now time.Time) (*quarantine.AuditEvent, error) {
	var pending bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM replay_items WHERE batch_id = $1 AND outcome = 'pending')`, id).Scan(&pending); err != nil || pending {
		return nil, err
	}
	b, err := getBatch(ctx, tx, id, "")
	if err != nil || b.State != quarantine.ReplayRunning || b.Counts[quarantine.ItemPending] > 0 {
		return nil, err
	}
	replays.Move(b, quarantine.ReplayCompleted, "", now)
	if err := saveBatch(ctx, tx, b); err != nil {
		return nil, err
	}
	return replays.CompleteEvent(b), nil
}

// SetReplayCanary records the canary's verdict; see store.Replays.
// Errors: EINVALID for an unknown verdict, ENOTFOUND, EUNAVAILABLE.
func (s *Store) SetReplayCanary(ctx context.Context, batchID, verdict string, until *time.Time) (*quarantine.ReplayBatch, error) {
	if !replays.ValidVerdict(verdict) {
		return nil, quarantine.FieldErrorf(quarantine.EINVALID, "canary_verdict", "unknown canary verdict %q", truncate(verdict))
	}
	var b *quarantine.ReplayBatch
	err := s.inTx(ctx, "record a canary verdict", func(tx pgx.Tx) error {
		var err error
		if b, err = getBatch(ctx, tx, batchID, lockClause); err != nil || b.CanaryVerdict == verdict {
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

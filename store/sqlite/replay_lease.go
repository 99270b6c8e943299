package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"slices"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/replays"
)

// LeaseReplayItems leases up to n pending items of a running batch to
// owner; see store.Replays. The write transaction holds the database's
// write lock, so concurrent leasers never get the same item. Errors:
// EINVALID for an empty owner, EUNAVAILABLE.
func (s *Store) LeaseReplayItems(ctx context.Context, batchID, owner string, n int, ttl time.Duration, maxSeq int) ([]quarantine.ReplayLease, error) {
	if owner == "" {
		return nil, quarantine.Errorf(quarantine.EINVALID, "a lease needs an owner")
	}
	out := []quarantine.ReplayLease{}
	if n <= 0 || !quarantine.ValidID(batchID) {
		return out, nil
	}
	err := s.write(ctx, "lease replay items", func(tx *sql.Tx) error {
		out = out[:0]
		var state string
		err := tx.QueryRowContext(ctx, `SELECT state FROM replay_batches WHERE id = ?`, batchID).Scan(&state)
		if err == sql.ErrNoRows || (err == nil && state != string(quarantine.ReplayRunning)) {
			return nil
		}
		if err != nil {
			return err
		}
		now := s.clock()
		q := `SELECT seq FROM replay_items WHERE batch_id = ? AND outcome = 'pending'
			AND (lease_owner = '' OR lease_expires_at < ?)`
		args := []any{batchID, micros(now)}
		if maxSeq > 0 {
			q += ` AND seq < ?`
			args = append(args, maxSeq)
		}
		rows, err := tx.QueryContext(ctx, q+` ORDER BY seq LIMIT ?`, append(args, n)...)
		if err != nil {
			return err
		}
		var seqs []int
		for rows.Next() {
			var seq int
			if err := rows.Scan(&seq); err != nil {
				rows.Close()
				return err
			}
			seqs = append(seqs, seq)
		}
		rows.Close()
		if err := rows.Err(); err != nil || len(seqs) == 0 {
			return err
		}
		sj, _ := json.Marshal(seqs)
		if _, err := tx.ExecContext(ctx, `UPDATE replay_items SET lease_owner = ?, lease_expires_at = ?,
			fence = fence + 1, attempts = attempts + 1, updated_at = ?
			WHERE batch_id = ? AND seq IN (SELECT value FROM json_each(?))`,
			owner, micros(now.Add(ttl)), micros(now), batchID, string(sj)); err != nil {
			return err
		}
		rows, err = tx.QueryContext(ctx, `SELECT `+itemColumns+`, i.fence FROM replay_items i
			WHERE i.batch_id = ? AND i.seq IN (SELECT value FROM json_each(?)) ORDER BY i.seq`, batchID, string(sj))
		if err != nil {
			return err
		}
		for rows.Next() {
			var l quarantine.ReplayLease
			if l.Item, err = scanItem(rows, &l.Fence); err != nil {
				rows.Close()
				return err
			}
			out = append(out, l)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for i := range out {
			if out[i].Message, err = getMessage(ctx, tx, out[i].Item.MessageID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ReleaseReplayItems gives leased items back when their fence still
// matches; see store.Replays. Errors: EUNAVAILABLE.
func (s *Store) ReleaseReplayItems(ctx context.Context, leases []quarantine.ReplayLease) error {
	if len(leases) == 0 {
		return nil
	}
	return s.write(ctx, "release replay items", func(tx *sql.Tx) error {
		now := micros(s.clock())
		for _, l := range leases {
			if _, err := tx.ExecContext(ctx, `UPDATE replay_items SET lease_owner = '', lease_expires_at = NULL,
				updated_at = ? WHERE batch_id = ? AND seq = ? AND fence = ? AND outcome = 'pending'`,
				now, l.Item.BatchID, l.Item.Seq, l.Fence); err != nil {
				return err
			}
		}
		return nil
	})
}

// RecordReplayResults records the outcomes of leased items in one
// transaction; see store.Replays. Errors: EINVALID for a result that is
// not an outcome of a publish, EUNAVAILABLE.
func (s *Store) RecordReplayResults(ctx context.Context, results []quarantine.ReplayResult) ([]int, error) {
	for _, r := range results {
		if err := replays.ValidateResult(r); err != nil {
			return nil, err
		}
	}
	var stale []int
	err := s.write(ctx, "record replay results", func(tx *sql.Tx) error {
		stale = nil
		now := s.clock()
		var batches []string
		for i, r := range results {
			var seq int
			err := tx.QueryRowContext(ctx, `SELECT seq FROM replay_items WHERE batch_id = ? AND message_id = ?
				AND fence = ? AND (outcome = 'pending' OR ? AND outcome = 'skipped' AND reason = 'cancelled' AND lease_owner <> '')`,
				r.BatchID, r.MessageID, r.Fence, replays.Published(r.Outcome)).Scan(&seq)
			if err == sql.ErrNoRows {
				stale = append(stale, i)
				continue
			}
			if err != nil {
				return err
			}
			if err := recordResult(ctx, tx, r, seq, now); err != nil {
				return err
			}
			if !slices.Contains(batches, r.BatchID) {
				batches = append(batches, r.BatchID)
			}
		}
		var events []*quarantine.AuditEvent
		for _, id := range batches {
			ev, err := completeIfDone(ctx, tx, id, now)
			if err != nil {
				return err
			}
			if ev != nil {
				events = append(events, ev)
			}
		}
		return s.appendAudits(ctx, tx, events)
	})
	if err != nil {
		return nil, err
	}
	return stale, nil
}

// recordResult writes r to its item (batch r.BatchID, seq) and moves the
// message: replayed when published, quarantined again otherwise.
func recordResult(ctx context.Context, tx *sql.Tx, r quarantine.ReplayResult, seq int, now time.Time) error {
	at := now
	if !r.At.IsZero() {
		at = r.At.UTC().Truncate(time.Microsecond)
	}
	var published any
	if replays.Published(r.Outcome) {
		published = micros(at)
	}
	dropped := make([]string, len(r.DroppedHeaders))
	for i, h := range r.DroppedHeaders {
		dropped[i] = quarantine.SanitizeText(h)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE replay_items SET
		outcome = CASE WHEN refail_id <> '' AND ?1 IN ('published', 'deduplicated') THEN 'refailed' ELSE ?1 END,
		reason = ?, destination = ?,
		payload_version = ?, payload_sha256 = ?, dropped_headers = ?, published_at = ?, updated_at = ?,
		lease_owner = '', lease_expires_at = NULL WHERE batch_id = ? AND seq = ?`,
		string(r.Outcome), quarantine.SanitizeText(r.Reason), quarantine.SanitizeText(r.Destination),
		r.PayloadVersion, quarantine.SanitizeText(r.PayloadSHA256), jsonArray(dropped), published, micros(now),
		r.BatchID, seq); err != nil {
		return err
	}
	q := `UPDATE messages SET status = 'quarantined', updated_at = ? WHERE id = ? AND status = 'replaying'`
	if replays.Published(r.Outcome) {
		// Replaying as usual; refailed when it came back before this
		// record; quarantined when its batch was cancelled while the
		// publish was in flight.
		q = `UPDATE messages SET status = CASE status WHEN 'refailed' THEN 'refailed' ELSE 'replayed' END,
			replay_count = replay_count + 1, updated_at = ?
			WHERE id = ? AND status IN ('replaying', 'refailed', 'quarantined')`
	}
	_, err := tx.ExecContext(ctx, q, micros(now), r.MessageID)
	return err
}

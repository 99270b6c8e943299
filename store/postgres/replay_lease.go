package postgres

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/replays"
)

// leaseSQL leases the first free pending items of a batch: locked with
// SKIP LOCKED, so that concurrent engines take different items, never
// waiting for each other.
const leaseSQL = `WITH picked AS (
	SELECT batch_id, seq FROM replay_items
	WHERE batch_id = $1 AND outcome = 'pending' AND (lease_owner = '' OR lease_expires_at < $2)
		AND ($3::int <= 0 OR seq < $3::int)
	ORDER BY seq LIMIT $4 FOR UPDATE SKIP LOCKED)
UPDATE replay_items i SET lease_owner = $5, lease_expires_at = $6, fence = i.fence + 1,
	attempts = i.attempts + 1, updated_at = $2
FROM picked p WHERE i.batch_id = p.batch_id AND i.seq = p.seq
RETURNING ` + itemColumns + `, i.fence`

// leaseMessagesSQL reads the leased items' messages with their current
// payloads.
const leaseMessagesSQL = `SELECT ` + messageColumns + `, pv.payload, pv.payload_text
FROM messages m
JOIN payload_versions pv ON pv.message_id = m.id AND pv.version = m.payload_version
WHERE m.id = ANY($1::text[])`

// LeaseReplayItems leases up to n pending items of a running batch to
// owner; see store.Replays. Errors: EINVALID for an empty owner,
// EUNAVAILABLE, EINTERNAL.
func (s *Store) LeaseReplayItems(ctx context.Context, batchID, owner string, n int, ttl time.Duration, maxSeq int) ([]quarantine.ReplayLease, error) {
	if owner == "" {
		return nil, quarantine.Errorf(quarantine.EINVALID, "a lease needs an owner")
	}
	out := []quarantine.ReplayLease{}
	if n <= 0 || !quarantine.ValidID(batchID) {
		return out, nil
	}
	err := s.inTx(ctx, "lease replay items", func(tx pgx.Tx) error {
		out = out[:0]
		var state string
		err := tx.QueryRow(ctx, `SELECT state FROM replay_batches WHERE id = $1`, batchID).Scan(&state)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && state != string(quarantine.ReplayRunning)) {
			return nil
		}
		if err != nil {
			return err
		}
		now := s.clock()
		rows, err := tx.Query(ctx, leaseSQL, batchID, now, maxSeq, n, owner, now.Add(ttl))
		if err != nil {
			return err
		}
		var r itemRow
		var fence int64
		if _, err := pgx.ForEachRow(rows, append(r.dest(), &fence), func() error {
			out = append(out, quarantine.ReplayLease{Item: r.item(), Fence: fence})
			r = itemRow{}
			return nil
		}); err != nil || len(out) == 0 {
			return err
		}
		slices.SortFunc(out, func(a, b quarantine.ReplayLease) int { return a.Item.Seq - b.Item.Seq })
		ids := make([]string, len(out))
		for i, l := range out {
			ids[i] = l.Item.MessageID
		}
		rows, err = tx.Query(ctx, leaseMessagesSQL, ids)
		if err != nil {
			return err
		}
		msgs := map[string]*quarantine.Message{}
		var mr messageRow
		var bin []byte
		var txt *string
		if _, err := pgx.ForEachRow(rows, append(mr.dest(), &bin, &txt), func() error {
			m, err := mr.message()
			if err != nil {
				return err
			}
			m.Payload = joinPayload(bin, txt)
			msgs[m.ID] = m
			mr, bin, txt = messageRow{}, nil, nil
			return nil
		}); err != nil {
			return err
		}
		for i := range out {
			if out[i].Message = msgs[out[i].Item.MessageID]; out[i].Message == nil {
				return quarantine.Errorf(quarantine.EINTERNAL, "replay item %d names a missing message", out[i].Item.Seq)
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
	sorted := slices.Clone(leases)
	slices.SortFunc(sorted, func(a, b quarantine.ReplayLease) int {
		if a.Item.BatchID != b.Item.BatchID {
			if a.Item.BatchID < b.Item.BatchID {
				return -1
			}
			return 1
		}
		return a.Item.Seq - b.Item.Seq
	})
	batches, seqs, fences := mk(len(sorted)), make([]int32, len(sorted)), make([]int64, len(sorted))
	for i, l := range sorted {
		batches[i], seqs[i], fences[i] = l.Item.BatchID, int32(l.Item.Seq), l.Fence
	}
	return s.inTx(ctx, "release replay items", func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE replay_items i SET lease_owner = '', lease_expires_at = NULL, updated_at = $4
			FROM unnest($1::text[], $2::int[], $3::bigint[]) AS u(batch_id, seq, fence)
			WHERE i.batch_id = u.batch_id AND i.seq = u.seq AND i.fence = u.fence AND i.outcome = 'pending'`,
			batches, seqs, fences, s.clock())
		return err
	})
}

// RecordReplayResults records the outcomes of leased items in one
// transaction, locking the batches (id order), then each item; see
// store.Replays. Errors: EINVALID for a result that is not an outcome of
// a publish, EUNAVAILABLE, EINTERNAL.
func (s *Store) RecordReplayResults(ctx context.Context, results []quarantine.ReplayResult) ([]int, error) {
	var batches []string
	for _, r := range results {
		if err := replays.ValidateResult(r); err != nil {
			return nil, err
		}
		if !slices.Contains(batches, r.BatchID) {
			batches = append(batches, r.BatchID)
		}
	}
	slices.Sort(batches)
	var stale []int
	err := s.inTx(ctx, "record replay results", func(tx pgx.Tx) error {
		stale = nil
		if len(batches) == 0 {
			return nil
		}
		if _, err := tx.Exec(ctx, `SELECT id FROM replay_batches WHERE id = ANY($1::text[]) ORDER BY id `+lockClause, batches); err != nil {
			return err
		}
		now := s.clock()
		for i, r := range results {
			var seq int32
			err := tx.QueryRow(ctx, `SELECT seq FROM replay_items WHERE batch_id = $1 AND message_id = $2
				AND fence = $3 AND (outcome = 'pending' OR $4 AND outcome = 'skipped' AND reason = 'cancelled' AND lease_owner <> '')
				FOR UPDATE`, r.BatchID, r.MessageID, r.Fence, replays.Published(r.Outcome)).Scan(&seq)
			if errors.Is(err, pgx.ErrNoRows) {
				stale = append(stale, i)
				continue
			}
			if err != nil {
				return err
			}
			if err := recordResult(ctx, tx, r, seq, now); err != nil {
				return err
			}
		}
		var events []*quarantine.AuditEvent
		for _, id := range batches {
			ev, err := completeIfDone(ctx, tx, id, now)
			if err != nil && quarantine.ErrorCode(err) != quarantine.ENOTFOUND {
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
func recordResult(ctx context.Context, tx pgx.Tx, r quarantine.ReplayResult, seq int32, now time.Time) error {
	at := now
	if !r.At.IsZero() {
		at = r.At.UTC().Truncate(time.Microsecond)
	}
	var published *time.Time
	if replays.Published(r.Outcome) {
		published = &at
	}
	dropped := make([]string, len(r.DroppedHeaders))
	for i, h := range r.DroppedHeaders {
		dropped[i] = quarantine.SanitizeText(h)
	}
	if _, err := tx.Exec(ctx, `UPDATE replay_items SET
		outcome = CASE WHEN refail_id <> '' AND $3 IN ('published', 'deduplicated') THEN 'refailed' ELSE $3 END,
		reason = $4, destination = $5,
		payload_version = $6, payload_sha256 = $7, dropped_headers = $8, published_at = $9, updated_at = $10,
		lease_owner = '', lease_expires_at = NULL WHERE batch_id = $1 AND seq = $2`,
		r.BatchID, seq, string(r.Outcome), quarantine.SanitizeText(r.Reason), quarantine.SanitizeText(r.Destination),
		r.PayloadVersion, quarantine.SanitizeText(r.PayloadSHA256), dropped, published, now); err != nil {
		return err
	}
	q := `UPDATE messages SET status = 'quarantined', updated_at = $2 WHERE id = $1 AND status = 'replaying'`
	if replays.Published(r.Outcome) {
		// Replaying as usual; refailed when it came back before this
		// record; quarantined when its batch was cancelled while the
		// publish was in flight.
		q = `UPDATE messages SET status = CASE status WHEN 'refailed' THEN 'refailed' ELSE 'replayed' END,
			replay_count = replay_count + 1, updated_at = $2
			WHERE id = $1 AND status IN ('replaying', 'refailed', 'quarantined')`
	}
	_, err := tx.Exec(ctx, q, r.MessageID, now)
	return err
}

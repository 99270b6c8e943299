package postgres

import (
	"context"
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
RETURNING ` + replays.ItemColumns + `, i.fence`

// pickSQL locks the first free pending items of a batch (SKIP LOCKED),
// for a lease that first takes its rate tokens.
const pickSQL = `SELECT seq FROM replay_items
	WHERE batch_id = $1 AND outcome = 'pending' AND (lease_owner = '' OR lease_expires_at < $2)
		AND ($3::int <= 0 OR seq < $3::int)
	ORDER BY seq LIMIT $4 FOR UPDATE SKIP LOCKED`

// leasePickedSQL leases the items picked (and locked) by pickSQL.
const leasePickedSQL = `UPDATE replay_items i SET lease_owner = $3, lease_expires_at = $4, fence = i.fence + 1,
	attempts = i.attempts + 1, updated_at = $5
WHERE i.batch_id = $1 AND i.seq = ANY($2::int[])
RETURNING ` + replays.ItemColumns + `, i.fence`

// runningSQL says whether batch $1 is running (false when there is
// none).
const runningSQL = `SELECT EXISTS (SELECT 1 FROM replay_batches WHERE id = $1 AND state = 'running')`

// leaseMessagesSQL reads the leased items' messages with their current
// payloads.
const leaseMessagesSQL = `SELECT ` + messageColumns + `, pv.payload, pv.payload_text
FROM messages m
JOIN payload_versions pv ON pv.message_id = m.id AND pv.version = m.payload_version
WHERE m.id = ANY($1::text[])`

// Lease leases the items of l in a transaction of its own
// (replays.Leaser): the free items are locked first (SKIP LOCKED), so
// that concurrent engines take different items, never waiting for each
// other; with buckets, then the buckets, then as many items as there are
// slots are leased. A batch that the skipped items left without pending
// ones is completed after (completeIfDone).
func (p backend) Lease(ctx context.Context, l replays.LeaseRequest) ([]quarantine.ReplayLease, time.Time, time.Duration, error) {
	out := []quarantine.ReplayLease{}
	var due time.Time
	var wait time.Duration
	var skipped bool
	err := p.s.inTx(ctx, "lease replay items", func(tx pgx.Tx) error {
		out, due, wait, skipped = out[:0], time.Time{}, 0, false
		var running bool
		if err := tx.QueryRow(ctx, runningSQL, l.BatchID).Scan(&running); err != nil || !running {
			return err
		}
		now := p.s.clock()
		due = now
		var rows pgx.Rows
		var err error
		if len(l.Buckets) == 0 {
			rows, err = tx.Query(ctx, leaseSQL, l.BatchID, now, l.MaxSeq, l.N, l.Owner, now.Add(l.TTL))
		} else {
			var seqs []int32
			if seqs, err = pickFree(ctx, tx, l.BatchID, now, l.MaxSeq, l.N); err != nil || len(seqs) == 0 {
				return err
			}
			var granted int
			// The lease runs from when the buckets were locked: waiting
			// for them (another engine's transaction, stopped or slow)
			// must not shorten it, or another lease could take the items
			// at once.
			if granted, due, wait, now, err = takeTokens(ctx, tx, l.Buckets, p.s.clock, replays.ReserveSlots(len(seqs), l.Lead, l.Ahead)); err != nil || granted == 0 {
				return err
			}
			rows, err = tx.Query(ctx, leasePickedSQL, l.BatchID, seqs[:granted], l.Owner, now.Add(l.TTL), now)
		}
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
		var skips int
		if out, skips, err = claimMessages(ctx, tx, l.BatchID, out, now); err != nil {
			return err
		}
		skipped = skips > 0
		slices.SortFunc(out, func(a, b quarantine.ReplayLease) int { return a.Item.Seq - b.Item.Seq })
		return nil
	})
	if err != nil {
		return nil, time.Time{}, 0, err
	}
	if skipped {
		if err := p.s.completeIfDone(ctx, l.BatchID); err != nil {
			return nil, time.Time{}, 0, err
		}
	}
	return out, due, wait, nil
}

// LeasedMessages reads the messages of leases through the pool
// (replays.Leaser).
func (p backend) LeasedMessages(ctx context.Context, leases []quarantine.ReplayLease) error {
	return translate(leasedMessages(ctx, p.s.pool, leases), "read leased messages")
}

func (p backend) ReleaseReplayItems(ctx context.Context, leases []quarantine.ReplayLease) error {
	return p.s.ReleaseReplayItems(ctx, leases)
}

// claimMessages locks the messages of the leased items (id order) and
// skips the items whose message another batch holds or published, or
// that was discarded (replays.Claim); the messages' rows are not
// changed. The holders are read in a statement after the lock, so that
// a discard or another lease that locked a message first is seen
// (replays.InFlight). It returns the leases kept and how many were
// skipped.
func claimMessages(ctx context.Context, tx pgx.Tx, batchID string, out []quarantine.ReplayLease, now time.Time) ([]quarantine.ReplayLease, int, error) {
	ids := make([]string, len(out))
	for i, l := range out {
		ids[i] = l.Item.MessageID
	}
	rows, err := tx.Query(ctx, `SELECT id, status FROM messages WHERE id = ANY($1::text[]) ORDER BY id FOR UPDATE`, ids)
	if err != nil {
		return nil, 0, err
	}
	status := make(map[string]quarantine.Status, len(out))
	var id, by string
	var st quarantine.Status
	if _, err := pgx.ForEachRow(rows, []any{&id, &st}, func() error { status[id] = st; return nil }); err != nil {
		return nil, 0, err
	}
	holders := replays.NewHolders()
	var pending bool
	rows, err = tx.Query(ctx, `SELECT message_id, batch_id, outcome = 'pending' FROM replay_items
		WHERE message_id = ANY($1::text[]) AND batch_id <> $2 AND attempts > 0 AND outcome IN (`+replays.HolderOutcomes+`)
		ORDER BY updated_at`, ids, batchID)
	if err != nil {
		return nil, 0, err
	}
	if _, err := pgx.ForEachRow(rows, []any{&id, &by, &pending}, func() error { holders.Add(id, by, pending); return nil }); err != nil {
		return nil, 0, err
	}
	skip, keep := replays.Claim(out, status, holders)
	if len(skip) > 0 {
		seqs, why := make([]int32, len(skip)), mk(len(skip))
		for i, k := range skip {
			seqs[i], why[i] = int32(k.Seq), k.Reason
		}
		if _, err := tx.Exec(ctx, `UPDATE replay_items i SET outcome = 'skipped', reason = u.reason, updated_at = $4,
			lease_owner = '', lease_expires_at = NULL
			FROM unnest($2::int[], $3::text[]) AS u(seq, reason) WHERE i.batch_id = $1 AND i.seq = u.seq`,
			batchID, seqs, why, now); err != nil {
			return nil, 0, err
		}
	}
	return keep, len(skip), nil
}

// leasedMessages sets the message of each lease. EINTERNAL when one is
// missing (an item always names a stored message).
func leasedMessages(ctx context.Context, q querier, out []quarantine.ReplayLease) error {
	ids := make([]string, len(out))
	for i, l := range out {
		ids[i] = l.Item.MessageID
	}
	rows, err := q.Query(ctx, leaseMessagesSQL, ids)
	if err != nil {
		return err
	}
	msgs := make(map[string]*quarantine.Message, len(out))
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
}

// pickFree locks up to n free pending items of a batch and returns their
// seqs in order.
func pickFree(ctx context.Context, tx pgx.Tx, batchID string, now time.Time, maxSeq, n int) ([]int32, error) {
	rows, err := tx.Query(ctx, pickSQL, batchID, now, maxSeq, n)
	if err != nil {
		return nil, err
	}
	var seqs []int32
	var seq int32
	_, err = pgx.ForEachRow(rows, []any{&seq}, func() error {
		seqs = append(seqs, seq)
		return nil
	})
	return seqs, err
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
	refusals := mk(len(sorted))
	for i, l := range sorted {
		batches[i], seqs[i], fences[i] = l.Item.BatchID, int32(l.Item.Seq), l.Fence
		refusals[i] = quarantine.ClipReason(l.Refusal)
	}
	return s.inTx(ctx, "release replay items", func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE replay_items i SET lease_owner = '', lease_expires_at = NULL, updated_at = $4,
				refusals = i.refusals + (u.refusal <> '')::int,
				reason = CASE WHEN u.refusal <> '' THEN u.refusal ELSE i.reason END
			FROM unnest($1::text[], $2::int[], $3::bigint[], $5::text[]) AS u(batch_id, seq, fence, refusal)
			WHERE i.batch_id = u.batch_id AND i.seq = u.seq AND i.fence = u.fence AND i.outcome = 'pending'`,
			batches, seqs, fences, s.clock(), refusals)
		return err
	})
}

// RecordReplayResults records the outcomes of leased items in one
// transaction, locking each item (key order), then their messages (id
// order); see store.Replays. The batch row is not locked: records of one
// batch (its engines' workers) do not wait for each other, and a cancel
// or a start waits for the items a record holds, or the record for
// theirs. Once the record committed, each batch whose items then have
// no pending one completes, in a transaction of its own that locks the
// batch first (two records finishing a batch at once: the later one
// sees both). Errors: EINVALID for a result that is not an outcome of a
// publish, EUNAVAILABLE, EINTERNAL.
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
	recorded := false
	err := s.inTx(ctx, "record replay results", func(tx pgx.Tx) error {
		stale, recorded = nil, false
		if len(batches) == 0 {
			return nil
		}
		now := s.clock()
		valid, err := lockResults(ctx, tx, results)
		if err != nil {
			return err
		}
		for i := range results {
			if _, ok := valid[i]; !ok {
				stale = append(stale, i)
			}
		}
		recorded = len(valid) > 0
		return recordResults(ctx, tx, results, valid, now)
	})
	if err != nil {
		return nil, err
	}
	if recorded {
		for _, id := range batches {
			if err := s.completeIfDone(ctx, id); err != nil {
				return nil, err
			}
		}
	}
	return stale, nil
}

// lockResults locks the items whose results may be recorded (their
// fence is current and they are pending, or they were cancelled while
// their lease was live and the result is a publish), in key order, and
// returns their seqs by index into results. The items are found through
// replay_items_message_idx, the batch id being a filter (concatenated
// with an empty string): without statistics of a new batch's items the
// planner ANDs in the batch's whole range of another index of the items
// for every result (docs/benchmarks.md).
func lockResults(ctx context.Context, tx pgx.Tx, results []quarantine.ReplayResult) (map[int]int32, error) {
	bs, ms := make([]string, len(results)), make([]string, len(results))
	fs, ps := make([]int64, len(results)), make([]bool, len(results))
	for i, r := range results {
		bs[i], ms[i], fs[i], ps[i] = r.BatchID, r.MessageID, r.Fence, replays.Published(r.Outcome)
	}
	rows, err := tx.Query(ctx, `SELECT u.idx, i.seq
		FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bool[]) WITH ORDINALITY AS u(b, m, f, p, idx)
		JOIN replay_items i ON i.message_id = u.m AND i.batch_id || '' = u.b AND i.fence = u.f
			AND (i.outcome = 'pending' OR u.p AND i.outcome = 'skipped' AND i.reason = 'cancelled' AND i.lease_owner <> '')
		ORDER BY i.batch_id, i.seq FOR UPDATE OF i`, bs, ms, fs, ps)
	if err != nil {
		return nil, err
	}
	out := make(map[int]int32, len(results))
	var idx int64
	var seq int32
	_, err = pgx.ForEachRow(rows, []any{&idx, &seq}, func() error {
		out[int(idx-1)] = seq
		return nil
	})
	return out, err
}

// resultRow is one result as jsonb_to_recordset reads it.
type resultRow struct {
	B string     `json:"b"`
	S int32      `json:"s"`
	O string     `json:"o"`
	P bool       `json:"p"`
	R string     `json:"r"`
	D string     `json:"d"`
	V int        `json:"v"`
	H string     `json:"h"`
	X []string   `json:"x"`
	A *time.Time `json:"a"`
}

// recordResults writes the valid results to their items and moves their
// messages (locked in id order), once: replayed when published (from
// quarantined, where the lease left them, or replaying, where an older
// version's lease moved them; refailed stays when it came back before
// this record), quarantined again otherwise (from replaying only). An
// item that noted an early re-failure becomes refailed.
func recordResults(ctx context.Context, tx pgx.Tx, results []quarantine.ReplayResult, valid map[int]int32, now time.Time) error {
	if len(valid) == 0 {
		return nil
	}
	rows := make([]resultRow, 0, len(valid))
	var published, other []string
	for i, r := range results {
		seq, ok := valid[i]
		if !ok {
			continue
		}
		at := now
		if !r.At.IsZero() {
			at = r.At.UTC().Truncate(time.Microsecond)
		}
		row := resultRow{B: r.BatchID, S: seq, O: string(r.Outcome), P: replays.Published(r.Outcome),
			R: quarantine.SanitizeText(r.Reason), D: quarantine.SanitizeText(r.Destination), V: r.PayloadVersion,
			H: quarantine.SanitizeText(r.PayloadSHA256), X: make([]string, len(r.DroppedHeaders))}
		for j, h := range r.DroppedHeaders {
			row.X[j] = quarantine.SanitizeText(h)
		}
		if row.P {
			row.A = &at
			published = append(published, r.MessageID)
		} else {
			other = append(other, r.MessageID)
		}
		rows = append(rows, row)
	}
	if _, err := tx.Exec(ctx, `UPDATE replay_items i SET
		outcome = CASE WHEN i.refail_id <> '' AND r.p THEN 'refailed' ELSE r.o END,
		reason = r.r, destination = r.d, payload_version = r.v, payload_sha256 = r.h,
		dropped_headers = ARRAY(SELECT jsonb_array_elements_text(r.x)), published_at = r.a, updated_at = $2,
		lease_owner = '', lease_expires_at = NULL
		FROM jsonb_to_recordset($1::jsonb) AS r(b text, s int, o text, p bool, r text, d text, v int, h text, x jsonb, a timestamptz)
		WHERE i.batch_id = r.b AND i.seq = r.s`, rows, now); err != nil {
		return err
	}
	if len(published) > 0 {
		if _, err := tx.Exec(ctx, `UPDATE messages SET status = CASE status WHEN 'refailed' THEN 'refailed' ELSE 'replayed' END,
			replay_count = replay_count + 1, updated_at = $2
			WHERE id IN (SELECT id FROM messages WHERE id = ANY($1::text[]) AND status IN ('replaying', 'refailed', 'quarantined')
				ORDER BY id FOR UPDATE)`, published, now); err != nil {
			return err
		}
	}
	if len(other) > 0 {
		if _, err := tx.Exec(ctx, `UPDATE messages SET status = 'quarantined', updated_at = $2
			WHERE id IN (SELECT id FROM messages WHERE id = ANY($1::text[]) AND status = 'replaying' ORDER BY id FOR UPDATE)`,
			other, now); err != nil {
			return err
		}
	}
	return nil
}

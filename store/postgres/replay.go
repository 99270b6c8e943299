package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/fields"
	"github.com/quarantine-dev/quarantine/store/internal/notfound"
	"github.com/quarantine-dev/quarantine/store/internal/replays"
	"github.com/quarantine-dev/quarantine/store/internal/txn"
)

// Replay batches live in replay_batches, their items in replay_items
// (migration 0003). Writers lock in one order: the batch row, then its
// items, then messages by id; so a cancel, a start, a result and a
// discard wait for each other instead of deadlocking.

// batchColumns are replay_batches' columns, the observe interval in
// microseconds.
var batchColumns = replays.BatchColumns("(extract(epoch FROM b.observe) * 1000000)::bigint")

// backend is the store as the shared methods (store/internal/replays,
// store/internal/ops and store/internal/alarms) use it: a snapshot to
// select from, read and write transactions.
type backend struct{ s *Store }

func (backend) HoldsWriter() bool { return false }

func (p backend) SearchReady(ctx context.Context, text string) error {
	return p.s.searchReady(ctx, text)
}

// Snapshot reads a pin's selection in one repeatable-read, read-only
// transaction, beside the short write transactions of its items.
func (p backend) Snapshot(ctx context.Context, fn func(replays.Selector) error) error {
	return p.s.snapshot(ctx, "select a replay's messages", func(tx pgx.Tx) error {
		return fn(selector{tx})
	})
}

func (p backend) Write(ctx context.Context, what string, fn func(replays.Tx) error) error {
	return p.s.inTx(ctx, what, func(tx pgx.Tx) error { return fn(replayTx{p.s, tx}) })
}

// selector reads candidates in the snapshot's transaction.
type selector struct{ tx pgx.Tx }

const candidateColumns = `SELECT m.id, m.status, m.queue, m.owner, m.idempotency_key, m.key_rule, m.replay_count FROM messages m`

func scanCandidates(rows pgx.Rows) ([]quarantine.ReplayCandidate, error) {
	var out []quarantine.ReplayCandidate
	var c quarantine.ReplayCandidate
	_, err := pgx.ForEachRow(rows, []any{&c.ID, &c.Status, &c.Queue, &c.Owner, &c.IdempotencyKey, &c.KeyRule, &c.ReplayCount}, func() error {
		c.Found = true
		out = append(out, c)
		return nil
	})
	return out, err
}

func (q selector) ByIDs(ctx context.Context, ids []string) ([]quarantine.ReplayCandidate, error) {
	rows, err := q.tx.Query(ctx, candidateColumns+` WHERE m.id = ANY($1::text[])`, ids)
	if err != nil {
		return nil, err
	}
	return scanCandidates(rows)
}

func (q selector) CountFilter(ctx context.Context, f quarantine.Filter) (int, error) {
	w := filterWhere(&f)
	var n int64
	err := q.tx.QueryRow(ctx, "SELECT count(*) FROM messages m"+w.sql(), w.args...).Scan(&n)
	return int(n), err
}

// EachFilter reads the messages f matches in id order by one statement,
// streamed, calling fn with each.
func (q selector) EachFilter(ctx context.Context, f quarantine.Filter, fn func(quarantine.ReplayCandidate) error) error {
	w := filterWhere(&f)
	rows, err := q.tx.Query(ctx, candidateColumns+w.sql()+" ORDER BY m.id", w.args...)
	if err != nil {
		return err
	}
	var c quarantine.ReplayCandidate
	c.Found = true
	_, err = pgx.ForEachRow(rows, []any{&c.ID, &c.Status, &c.Queue, &c.Owner, &c.IdempotencyKey, &c.KeyRule, &c.ReplayCount}, func() error {
		return fn(c)
	})
	return err
}

func (t replayTx) InsertBatch(ctx context.Context, b *quarantine.ReplayBatch) error {
	_, err := t.tx.Exec(ctx, `INSERT INTO replay_batches (id, state, state_reason, reason, actor,
		dest_queue, dest_collector, rate, burst, canary, observe, halt_refail_ratio, force_without_key, queues,
		owners, total, pin_total, canary_verdict, canary_until, created_at, updated_at, started_at, finished_at, expires_at,
		start_at, start_force)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11::bigint * interval '1 microsecond', $12, $13, $14,
		$15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26)`,
		b.ID, string(b.State), b.StateReason, b.Reason, b.Actor, b.Destination.Queue, b.Destination.Collector,
		b.Rate, b.Burst, b.Canary, b.Observe.Microseconds(), b.HaltRefailRatio, b.ForceWithoutKey, b.Queues,
		b.Owners, b.Total, b.PinTotal, b.CanaryVerdict, b.CanaryUntil, b.CreatedAt, b.UpdatedAt,
		b.StartedAt, b.FinishedAt, b.ExpiresAt, b.StartAt, b.StartForce)
	return err
}

// itemCopyColumns are the columns InsertItems copies.
var itemCopyColumns = []string{"batch_id", "seq", "message_id", "queue", "outcome", "reason", "idempotency_key", "updated_at"}

// InsertItems writes one chunk of a batch's items by COPY (their counts
// follow, by the statement trigger of migration 0009, which COPY fires
// once as an INSERT does).
func (t replayTx) InsertItems(ctx context.Context, batchID string, items []quarantine.ReplayItem) error {
	if len(items) == 0 {
		return nil
	}
	row := make([]any, len(itemCopyColumns))
	_, err := t.tx.CopyFrom(ctx, pgx.Identifier{"replay_items"}, itemCopyColumns, pgx.CopyFromFunc(func() ([]any, error) {
		if len(items) == 0 {
			return nil, nil
		}
		it := items[0]
		items = items[1:]
		row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7] = batchID, int32(it.Seq), it.MessageID, it.Queue, string(it.Outcome), it.Reason, it.IdempotencyKey, it.UpdatedAt
		return row, nil
	}))
	return err
}

// SavePin writes a pinning batch's total and update time, locking its
// row, and reports false when it is no longer pinning.
func (t replayTx) SavePin(ctx context.Context, b *quarantine.ReplayBatch) (bool, error) {
	tag, err := t.tx.Exec(ctx, `UPDATE replay_batches SET total = $2, updated_at = $3 WHERE id = $1 AND state = 'pinning'`,
		b.ID, b.Total, b.UpdatedAt)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

// AddPin adds n items to a pinning batch's total, locking its row until
// the commit, and reports false when it is no longer pinning. Chunks
// commit in any order: the update time only moves forward.
func (t replayTx) AddPin(ctx context.Context, id string, n int, at time.Time) (bool, error) {
	tag, err := t.tx.Exec(ctx, `UPDATE replay_batches SET total = total + $2, updated_at = greatest(updated_at, $3)
		WHERE id = $1 AND state = 'pinning'`, id, n, at)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

// DeleteBatch removes a batch still pinning, its items and counts: it
// locks the batch's row (a chunk's transaction waits for it, then finds
// the batch gone), removes the items and the counts, then the batch,
// which replay_counts' foreign key needs last. Nothing when the batch is
// no longer pinning.
func (t replayTx) DeleteBatch(ctx context.Context, id string) error {
	var pinning bool
	if err := t.tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM replay_batches WHERE id = $1 AND state = 'pinning' FOR UPDATE)`, id).Scan(&pinning); err != nil || !pinning {
		return err
	}
	for _, q := range []string{`DELETE FROM replay_items WHERE batch_id = $1`, `DELETE FROM replay_counts WHERE batch_id = $1`, `DELETE FROM replay_batches WHERE id = $1`} {
		if _, err := t.tx.Exec(ctx, q, id); err != nil {
			return err
		}
	}
	return nil
}

// SaveBatch writes the fields of b that change after its creation.
func (t replayTx) SaveBatch(ctx context.Context, b *quarantine.ReplayBatch) error {
	_, err := t.tx.Exec(ctx, `UPDATE replay_batches SET state = $2, state_reason = $3, updated_at = $4,
		started_at = $5, finished_at = $6, expires_at = $7, canary_verdict = $8, canary_until = $9,
		total = $10, queues = $11, owners = $12, start_at = $13, start_force = $14 WHERE id = $1`,
		b.ID, string(b.State), b.StateReason, b.UpdatedAt, b.StartedAt, b.FinishedAt, b.ExpiresAt,
		b.CanaryVerdict, b.CanaryUntil, b.Total, b.Queues, b.Owners, b.StartAt, b.StartForce)
	return err
}

// batchRow receives batchColumns.
type batchRow struct {
	b       quarantine.ReplayBatch
	observe int64
}

func (r *batchRow) dest() []any {
	b := &r.b
	return []any{&b.ID, &b.State, &b.StateReason, &b.Reason, &b.Actor, &b.Destination.Queue,
		&b.Destination.Collector, &b.Rate, &b.Burst, &b.Canary, &r.observe, &b.HaltRefailRatio,
		&b.ForceWithoutKey, &b.Queues, &b.Owners, &b.Total, &b.PinTotal, &b.CanaryVerdict, &b.CanaryUntil, &b.CreatedAt,
		&b.UpdatedAt, &b.StartedAt, &b.FinishedAt, &b.ExpiresAt, &b.StartAt, &b.StartForce}
}

func (r *batchRow) batch() *quarantine.ReplayBatch {
	b := r.b
	b.Observe = time.Duration(r.observe) * time.Microsecond
	b.CanaryUntil, b.StartedAt, b.FinishedAt, b.ExpiresAt = utcPtr(b.CanaryUntil), utcPtr(b.StartedAt), utcPtr(b.FinishedAt), utcPtr(b.ExpiresAt)
	b.StartAt = utcPtr(b.StartAt)
	b.CreatedAt, b.UpdatedAt = b.CreatedAt.UTC(), b.UpdatedAt.UTC()
	if b.Queues == nil {
		b.Queues = []string{}
	}
	if b.Owners == nil {
		b.Owners = []string{}
	}
	b.Counts = replays.ZeroCounts()
	return &b
}

// getBatch reads one batch with its counts, or ENOTFOUND; lock is "" or a
// locking clause (FOR NO KEY UPDATE).
func getBatch(ctx context.Context, q querier, id, lock string) (*quarantine.ReplayBatch, error) {
	if !quarantine.ValidID(id) {
		return nil, notfound.Replay(id)
	}
	var r batchRow
	err := q.QueryRow(ctx, `SELECT `+batchColumns+` FROM replay_batches b WHERE b.id = $1 `+lock, id).Scan(r.dest()...)
	if err != nil {
		return nil, orNotFound(err, notfound.Replay(id))
	}
	b := r.batch()
	return b, fillCounts(ctx, q, []*quarantine.ReplayBatch{b})
}

// fillCounts sets the counts by outcome of bs, summed from the deltas the
// triggers of replay_items append (migration 0009).
func fillCounts(ctx context.Context, q querier, bs []*quarantine.ReplayBatch) error {
	if len(bs) == 0 {
		return nil
	}
	byID, ids := replays.ByID(bs)
	rows, err := q.Query(ctx, `SELECT batch_id, outcome, sum(n)::bigint FROM replay_counts
		WHERE batch_id = ANY($1::text[]) GROUP BY batch_id, outcome`, ids)
	if err != nil {
		return err
	}
	var id string
	var o quarantine.ItemOutcome
	var n int
	_, err = pgx.ForEachRow(rows, []any{&id, &o, &n}, func() error {
		byID[id].Counts[o] = n
		return nil
	})
	return err
}

// GetReplay returns one batch with its counts. Errors: ENOTFOUND,
// EUNAVAILABLE, EINTERNAL.
func (s *Store) GetReplay(ctx context.Context, id string) (*quarantine.ReplayBatch, error) {
	return txn.Get(ctx, s.snapshot, "read a replay", func(tx pgx.Tx) (*quarantine.ReplayBatch, error) {
		return getBatch(ctx, tx, id, "")
	})
}

// queryBatches reads the batches q selects, with their counts.
func queryBatches(ctx context.Context, tx pgx.Tx, q string, args ...any) ([]*quarantine.ReplayBatch, error) {
	out, err := scanBatches(ctx, tx, q, args...)
	if err != nil {
		return nil, err
	}
	return out, fillCounts(ctx, tx, out)
}

// scanBatches reads the batches q selects, without their counts.
func scanBatches(ctx context.Context, tx pgx.Tx, q string, args ...any) ([]*quarantine.ReplayBatch, error) {
	rows, err := tx.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	out := []*quarantine.ReplayBatch{}
	var r batchRow
	if _, err := pgx.ForEachRow(rows, r.dest(), func() error {
		out = append(out, r.batch())
		r = batchRow{}
		return nil
	}); err != nil {
		return nil, err
	}
	return out, nil
}

func (p backend) Batches(ctx context.Context, f quarantine.ReplayFilter, limit int) ([]*quarantine.ReplayBatch, error) {
	w := &where{}
	if len(f.State) > 0 {
		w.literals("b.state", fields.Strings(f.State))
	}
	if f.Queue != "" {
		w.conds = append(w.conds, w.arg(f.Queue)+" = ANY(b.queues)")
	}
	if f.Actor != "" {
		w.conds = append(w.conds, "b.actor = "+w.arg(f.Actor))
	}
	if f.Owners != nil {
		w.conds = append(w.conds, "b.owners && "+w.arg(f.Owners)+"::text[]")
	}
	if f.After != "" {
		w.conds = append(w.conds, "b.id < "+w.arg(f.After))
	}
	q := `SELECT ` + batchColumns + ` FROM replay_batches b` + w.sql() + " ORDER BY b.id DESC LIMIT " + w.arg(limit)
	return txn.Get(ctx, p.s.snapshot, "list replays", func(tx pgx.Tx) ([]*quarantine.ReplayBatch, error) {
		return queryBatches(ctx, tx, q, w.args...)
	})
}

func (p backend) Runnable(ctx context.Context, now time.Time) ([]*quarantine.ReplayBatch, error) {
	return txn.Get(ctx, p.s.snapshot, "list runnable replays", func(tx pgx.Tx) ([]*quarantine.ReplayBatch, error) {
		return scanBatches(ctx, tx, `SELECT `+batchColumns+` FROM replay_batches b
			WHERE b.state = 'running' OR (b.state = 'draft' AND b.expires_at < $1)
				OR (b.state = 'scheduled' AND b.start_at <= $1) ORDER BY b.id`, now)
	})
}

func (p backend) StalePins(ctx context.Context, before time.Time) ([]string, error) {
	rows, err := p.s.pool.Query(ctx, `SELECT id FROM replay_batches WHERE state = 'pinning' AND updated_at < $1`, before)
	if err != nil {
		return nil, translate(err, "find abandoned pins")
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return ids, translate(err, "find abandoned pins")
}

// itemRow receives replays.ItemColumns.
type itemRow struct{ it quarantine.ReplayItem }

func (r *itemRow) dest() []any {
	it := &r.it
	return []any{&it.BatchID, &it.Seq, &it.MessageID, &it.Queue, &it.Outcome, &it.Reason, &it.Destination,
		&it.IdempotencyKey, &it.PayloadVersion, &it.PayloadSHA256, &it.DroppedHeaders, &it.Attempts, &it.RefailID,
		&it.PublishedAt, &it.UpdatedAt, &it.Refusals}
}

func (r *itemRow) item() quarantine.ReplayItem {
	it := r.it
	it.PublishedAt, it.UpdatedAt = utcPtr(it.PublishedAt), it.UpdatedAt.UTC()
	if it.DroppedHeaders == nil {
		it.DroppedHeaders = []string{}
	}
	return it
}

func (p backend) Items(ctx context.Context, f quarantine.ReplayItemFilter, limit int) ([]quarantine.ReplayItem, bool, error) {
	w := &where{}
	w.conds = append(w.conds, "i.batch_id = "+w.arg(f.BatchID), "i.seq > "+w.arg(f.After))
	if len(f.Outcome) > 0 {
		w.literals("i.outcome", fields.Strings(f.Outcome))
	}
	q := `SELECT ` + replays.ItemColumns + ` FROM replay_items i` + w.sql() + ` ORDER BY i.seq LIMIT ` + w.arg(limit)
	out := []quarantine.ReplayItem{}
	found := false
	err := p.s.snapshot(ctx, "list replay items", func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM replay_batches WHERE id = $1)`, f.BatchID).Scan(&found); err != nil || !found {
			return err
		}
		rows, err := tx.Query(ctx, q, w.args...)
		if err != nil {
			return err
		}
		var r itemRow
		_, err = pgx.ForEachRow(rows, r.dest(), func() error {
			out = append(out, r.item())
			r = itemRow{}
			return nil
		})
		return err
	})
	return out, found, err
}

// lockClause locks a batch row against other writers of it, not against
// the key share of inserted items.
const lockClause = "FOR NO KEY UPDATE"

// CheckIncident applies the incident guard to batch b (its items stored):
// the new dead letters of its queues within the guard's window, its own
// messages not counted.
func (t replayTx) CheckIncident(ctx context.Context, g *quarantine.IncidentGuard, b *quarantine.ReplayBatch, force bool, now time.Time) error {
	if g == nil || force {
		return nil
	}
	var queues []string
	var pending int32
	if err := t.tx.QueryRow(ctx, `SELECT coalesce(array_agg(DISTINCT queue), '{}'), count(*) FROM replay_items
		WHERE batch_id = $1 AND outcome = 'pending'`, b.ID).Scan(&queues, &pending); err != nil {
		return err
	}
	if int(pending) <= b.Canary || len(queues) == 0 {
		return nil
	}
	rows, err := t.tx.Query(ctx, `SELECT m.queue, count(*) FROM messages m
		WHERE m.queue = ANY($1::text[]) AND m.collected_at >= $2
		AND NOT EXISTS (SELECT 1 FROM replay_items i WHERE i.batch_id = $3 AND i.message_id = m.id)
		GROUP BY m.queue`, queues, now.Add(-g.Window), b.ID)
	if err != nil {
		return err
	}
	inflow := map[string]int{}
	var q string
	var n int64
	if _, err := pgx.ForEachRow(rows, []any{&q, &n}, func() error { inflow[q] = int(n); return nil }); err != nil {
		return err
	}
	return g.Check(int(pending), b.Canary, force, inflow)
}

// CountReplays returns the number of batches in each state; see
// store.Replays. Errors: EUNAVAILABLE.
func (s *Store) CountReplays(ctx context.Context) (map[quarantine.ReplayState]int, error) {
	out := make(map[quarantine.ReplayState]int, len(quarantine.ReplayStates))
	for _, st := range quarantine.ReplayStates {
		out[st] = 0
	}
	opts := pgx.TxOptions{AccessMode: pgx.ReadOnly}
	err := s.inTxOpts(ctx, opts, "count replays", func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT state, count(*) FROM replay_batches GROUP BY state`)
		if err != nil {
			return err
		}
		var st string
		var n int64
		_, err = pgx.ForEachRow(rows, []any{&st, &n}, func() error {
			out[quarantine.ReplayState(st)] = int(n)
			return nil
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

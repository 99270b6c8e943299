package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"strings"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/fields"
	"github.com/quarantine-dev/quarantine/store/internal/notfound"
	"github.com/quarantine-dev/quarantine/store/internal/replays"
	"github.com/quarantine-dev/quarantine/store/internal/txn"
)

// Replay batches live in replay_batches, their items in replay_items
// (migration 0004). Every change runs in the one write transaction, which
// holds the database's write lock: no other writer sees a half-made batch,
// and two leases cannot take the same item.

// batchColumns are replay_batches' columns (observe is in microseconds).
var batchColumns = replays.BatchColumns("b.observe")

// backend is the store as the shared methods (store/internal/replays,
// store/internal/ops and store/internal/alarms) use it: a snapshot to
// select from, read and write transactions.
type backend struct{ s *Store }

func (backend) HoldsWriter() bool { return true }

func (p backend) SearchReady(ctx context.Context, text string) error {
	return p.s.searchReady(ctx, text)
}

// Snapshot reads the pin's candidates in one read transaction without the
// memory map (readUnmapped): a pin reads much of the messages table.
func (p backend) Snapshot(ctx context.Context, fn func(replays.Selector) error) error {
	return p.s.readUnmapped(ctx, "select a replay's messages", func(tx *sql.Tx) error { return fn(selector{tx}) })
}

func (p backend) Write(ctx context.Context, what string, fn func(replays.Tx) error) error {
	return p.s.write(ctx, what, func(tx *sql.Tx) error { return fn(replayTx{p.s, tx}) })
}

// selector reads candidates in the snapshot's transaction.
type selector struct{ tx *sql.Tx }

const candidateColumns = `SELECT m.id, m.status, m.queue, m.owner, m.idempotency_key, m.key_rule, m.replay_count FROM messages m`

func scanCandidates(rows *sql.Rows, err error) ([]quarantine.ReplayCandidate, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []quarantine.ReplayCandidate
	for rows.Next() {
		var c quarantine.ReplayCandidate
		var st string
		if err := rows.Scan(&c.ID, &st, &c.Queue, &c.Owner, &c.IdempotencyKey, &c.KeyRule, &c.ReplayCount); err != nil {
			return nil, err
		}
		c.Status, c.Found = quarantine.Status(st), true
		out = append(out, c)
	}
	return out, rows.Err()
}

func (q selector) ByIDs(ctx context.Context, ids []string) ([]quarantine.ReplayCandidate, error) {
	return scanCandidates(q.tx.QueryContext(ctx, candidateColumns+` WHERE m.id IN (SELECT value FROM json_each(?))`, jsonArray(ids)))
}

func (q selector) CountFilter(ctx context.Context, f quarantine.Filter) (int, error) {
	w, args := where(f, false)
	var n int
	err := q.tx.QueryRowContext(ctx, "SELECT count(*) FROM messages m"+w, args...).Scan(&n)
	return n, err
}

// EachFilter reads the messages f matches in id order by one statement
// (the id's index), calling fn with each.
func (q selector) EachFilter(ctx context.Context, f quarantine.Filter, fn func(quarantine.ReplayCandidate) error) error {
	w, args := where(f, false)
	rows, err := q.tx.QueryContext(ctx, candidateColumns+w+" ORDER BY m.id", args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	var c quarantine.ReplayCandidate
	var st string
	c.Found = true
	for rows.Next() {
		if err := rows.Scan(&c.ID, &st, &c.Queue, &c.Owner, &c.IdempotencyKey, &c.KeyRule, &c.ReplayCount); err != nil {
			return err
		}
		c.Status = quarantine.Status(st)
		if err := fn(c); err != nil {
			return err
		}
	}
	return rows.Err()
}

func (t replayTx) InsertBatch(ctx context.Context, b *quarantine.ReplayBatch) error {
	_, err := t.tx.ExecContext(ctx, `INSERT INTO replay_batches (id, state, state_reason, reason, actor,
		dest_queue, dest_collector, rate, burst, canary, observe, halt_refail_ratio, force_without_key, queues,
		owners, total, pin_total, canary_verdict, canary_until, created_at, updated_at, started_at, finished_at, expires_at,
		start_at, start_force)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		b.ID, string(b.State), b.StateReason, b.Reason, b.Actor, b.Destination.Queue, b.Destination.Collector,
		b.Rate, b.Burst, b.Canary, b.Observe.Microseconds(), b.HaltRefailRatio, b.ForceWithoutKey, jsonArray(b.Queues),
		jsonArray(b.Owners), b.Total, b.PinTotal, b.CanaryVerdict, microsPtr(b.CanaryUntil), micros(b.CreatedAt), micros(b.UpdatedAt),
		microsPtr(b.StartedAt), microsPtr(b.FinishedAt), microsPtr(b.ExpiresAt), microsPtr(b.StartAt), b.StartForce)
	return err
}

// itemRowsPerInsert is how many items one INSERT of InsertItems
// writes: 8 parameters each, under SQLite's bound of 32,766.
const itemRowsPerInsert = 500

// insertItemsSQL is the INSERT of rows items, each of the 8 parameters
// of itemArgs. Anonymous parameters only: the driver looks up the name
// of every parameter it binds, a scan of the numbered ones each.
func insertItemsSQL(rows int) string {
	return `INSERT INTO replay_items (batch_id, seq, message_id, queue, outcome, reason, idempotency_key, updated_at) VALUES ` +
		strings.Repeat("(?, ?, ?, ?, ?, ?, ?, ?), ", rows-1) + "(?, ?, ?, ?, ?, ?, ?, ?)"
}

var (
	insertItemsFull = insertItemsSQL(itemRowsPerInsert)
	insertItemsOne  = insertItemsSQL(1)
)

// InsertItems writes one chunk of a batch's items and adds them to its
// counts (migration 0011 keeps them). The items are bound as parameters
// of multi-row INSERTs, each prepared once per call (parsing a statement
// of 500 rows took as long as binding them).
func (t replayTx) InsertItems(ctx context.Context, batchID string, items []quarantine.ReplayItem) error {
	if len(items) == 0 {
		return nil
	}
	counts := map[string]int{}
	upd := micros(items[0].UpdatedAt)
	args := make([]any, 0, 8*min(len(items), itemRowsPerInsert))
	var full, one *sql.Stmt
	defer func() {
		for _, st := range []*sql.Stmt{full, one} {
			if st != nil {
				st.Close()
			}
		}
	}()
	for lo := 0; lo < len(items); {
		st, q, rows := &full, insertItemsFull, itemRowsPerInsert
		if len(items)-lo < itemRowsPerInsert {
			st, q, rows = &one, insertItemsOne, 1
		}
		if *st == nil {
			var err error
			if *st, err = t.tx.PrepareContext(ctx, q); err != nil {
				return err
			}
		}
		args = args[:0]
		for _, it := range items[lo : lo+rows] {
			args = append(args, batchID, it.Seq, it.MessageID, it.Queue, string(it.Outcome), it.Reason, it.IdempotencyKey, upd)
			counts[string(it.Outcome)]++
		}
		if _, err := (*st).ExecContext(ctx, args...); err != nil {
			return err
		}
		lo += rows
	}
	cj, err := json.Marshal(counts)
	if err != nil {
		return err
	}
	_, err = t.tx.ExecContext(ctx, `INSERT INTO replay_counts (batch_id, outcome, n)
		SELECT ?, j.key, j.value FROM json_each(?) j WHERE true
		ON CONFLICT (batch_id, outcome) DO UPDATE SET n = n + excluded.n`, batchID, string(cj))
	return err
}

// SavePin writes a pinning batch's total and update time, and reports
// false when it is no longer pinning.
func (t replayTx) SavePin(ctx context.Context, b *quarantine.ReplayBatch) (bool, error) {
	res, err := t.tx.ExecContext(ctx, `UPDATE replay_batches SET total = ?, updated_at = ? WHERE id = ? AND state = 'pinning'`,
		b.Total, micros(b.UpdatedAt), b.ID)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// AddPin adds n items to a pinning batch's total, and reports false
// when it is no longer pinning.
func (t replayTx) AddPin(ctx context.Context, id string, n int, at time.Time) (bool, error) {
	res, err := t.tx.ExecContext(ctx, `UPDATE replay_batches SET total = total + ?, updated_at = max(updated_at, ?)
		WHERE id = ? AND state = 'pinning'`, n, micros(at), id)
	if err != nil {
		return false, err
	}
	k, err := res.RowsAffected()
	return k == 1, err
}

// DeleteBatch removes a batch still pinning, its items and counts.
func (t replayTx) DeleteBatch(ctx context.Context, id string) error {
	res, err := t.tx.ExecContext(ctx, `DELETE FROM replay_batches WHERE id = ? AND state = 'pinning'`, id)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return err
	}
	for _, q := range []string{`DELETE FROM replay_items WHERE batch_id = ?`, `DELETE FROM replay_counts WHERE batch_id = ?`} {
		if _, err := t.tx.ExecContext(ctx, q, id); err != nil {
			return err
		}
	}
	return nil
}

// SaveBatch writes the fields of b that change after its creation.
func (t replayTx) SaveBatch(ctx context.Context, b *quarantine.ReplayBatch) error {
	_, err := t.tx.ExecContext(ctx, `UPDATE replay_batches SET state = ?, state_reason = ?, updated_at = ?,
		started_at = ?, finished_at = ?, expires_at = ?, canary_verdict = ?, canary_until = ?,
		total = ?, queues = ?, owners = ?, start_at = ?, start_force = ? WHERE id = ?`,
		string(b.State), b.StateReason, micros(b.UpdatedAt), microsPtr(b.StartedAt), microsPtr(b.FinishedAt),
		microsPtr(b.ExpiresAt), b.CanaryVerdict, microsPtr(b.CanaryUntil), b.Total, jsonArray(b.Queues), jsonArray(b.Owners),
		microsPtr(b.StartAt), b.StartForce, b.ID)
	return err
}

func scanBatch(r scanner) (*quarantine.ReplayBatch, error) {
	var (
		b                       quarantine.ReplayBatch
		state, queues, owners   string
		observe, created, upd   int64
		until, started, fin, ex sql.NullInt64
		startAt                 sql.NullInt64
	)
	if err := r.Scan(&b.ID, &state, &b.StateReason, &b.Reason, &b.Actor, &b.Destination.Queue,
		&b.Destination.Collector, &b.Rate, &b.Burst, &b.Canary, &observe, &b.HaltRefailRatio,
		&b.ForceWithoutKey, &queues, &owners, &b.Total, &b.PinTotal, &b.CanaryVerdict, &until, &created, &upd,
		&started, &fin, &ex, &startAt, &b.StartForce); err != nil {
		return nil, err
	}
	b.State, b.Observe = quarantine.ReplayState(state), time.Duration(observe)*time.Microsecond
	if err := json.Unmarshal([]byte(queues), &b.Queues); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(owners), &b.Owners); err != nil {
		return nil, err
	}
	b.CanaryUntil, b.StartedAt, b.FinishedAt, b.ExpiresAt = fromMicrosPtr(until), fromMicrosPtr(started), fromMicrosPtr(fin), fromMicrosPtr(ex)
	b.StartAt = fromMicrosPtr(startAt)
	b.CreatedAt, b.UpdatedAt = fromMicros(created), fromMicros(upd)
	b.Counts = replays.ZeroCounts()
	return &b, nil
}

// getBatch reads one batch with its counts in tx, or ENOTFOUND.
func getBatch(ctx context.Context, tx *sql.Tx, id string) (*quarantine.ReplayBatch, error) {
	if !quarantine.ValidID(id) {
		return nil, notfound.Replay(id)
	}
	b, err := scanBatch(tx.QueryRowContext(ctx, `SELECT `+batchColumns+` FROM replay_batches b WHERE b.id = ?`, id))
	if err != nil {
		return nil, orNotFound(err, notfound.Replay(id))
	}
	return b, fillCounts(ctx, tx, []*quarantine.ReplayBatch{b})
}

// fillCounts sets the counts by outcome of bs, as kept in replay_counts
// (migration 0011).
func fillCounts(ctx context.Context, tx *sql.Tx, bs []*quarantine.ReplayBatch) error {
	if len(bs) == 0 {
		return nil
	}
	byID, ids := replays.ByID(bs)
	rows, err := tx.QueryContext(ctx, `SELECT batch_id, outcome, n FROM replay_counts
		WHERE batch_id IN (SELECT value FROM json_each(?))`, jsonArray(ids))
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id, o string
		var n int
		if err := rows.Scan(&id, &o, &n); err != nil {
			return err
		}
		byID[id].Counts[quarantine.ItemOutcome(o)] = n
	}
	return rows.Err()
}

// GetReplay returns one batch with its counts, or ENOTFOUND.
func (s *Store) GetReplay(ctx context.Context, id string) (*quarantine.ReplayBatch, error) {
	return txn.Get(ctx, s.read, "read a replay", func(tx *sql.Tx) (*quarantine.ReplayBatch, error) {
		return getBatch(ctx, tx, id)
	})
}

// queryBatches reads the batches q selects, with their counts.
func queryBatches(ctx context.Context, tx *sql.Tx, q string, args ...any) ([]*quarantine.ReplayBatch, error) {
	out, err := scanBatches(ctx, tx, q, args...)
	if err != nil {
		return nil, err
	}
	return out, fillCounts(ctx, tx, out)
}

// scanBatches reads the batches q selects, without their counts.
func scanBatches(ctx context.Context, tx *sql.Tx, q string, args ...any) ([]*quarantine.ReplayBatch, error) {
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []*quarantine.ReplayBatch{}
	for rows.Next() {
		b, err := scanBatch(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

func (p backend) Batches(ctx context.Context, f quarantine.ReplayFilter, limit int) ([]*quarantine.ReplayBatch, error) {
	var conds []string
	var args []any
	if len(f.State) > 0 {
		conds = append(conds, "b.state IN (SELECT value FROM json_each(?))")
		args = append(args, jsonArray(fields.Strings(f.State)))
	}
	if f.Queue != "" {
		conds = append(conds, "EXISTS (SELECT 1 FROM json_each(b.queues) q WHERE q.value = ?)")
		args = append(args, f.Queue)
	}
	if f.Actor != "" {
		conds = append(conds, "b.actor = ?")
		args = append(args, f.Actor)
	}
	if f.Owners != nil {
		conds = append(conds, "EXISTS (SELECT 1 FROM json_each(b.owners) o WHERE o.value IN (SELECT value FROM json_each(?)))")
		args = append(args, jsonArray(f.Owners))
	}
	if f.After != "" {
		conds = append(conds, "b.id < ?")
		args = append(args, f.After)
	}
	q := `SELECT ` + batchColumns + ` FROM replay_batches b`
	if len(conds) > 0 {
		q += " WHERE " + strings.Join(conds, " AND ")
	}
	q += " ORDER BY b.id DESC LIMIT ?"
	args = append(args, limit)
	return txn.Get(ctx, p.s.read, "list replays", func(tx *sql.Tx) ([]*quarantine.ReplayBatch, error) {
		return queryBatches(ctx, tx, q, args...)
	})
}

func (p backend) Runnable(ctx context.Context, now time.Time) ([]*quarantine.ReplayBatch, error) {
	return txn.Get(ctx, p.s.read, "list runnable replays", func(tx *sql.Tx) ([]*quarantine.ReplayBatch, error) {
		return scanBatches(ctx, tx, `SELECT `+batchColumns+` FROM replay_batches b
			WHERE b.state = 'running' OR (b.state = 'draft' AND b.expires_at < ?1)
				OR (b.state = 'scheduled' AND b.start_at <= ?1) ORDER BY b.id`, micros(now))
	})
}

func (p backend) StalePins(ctx context.Context, before time.Time) ([]string, error) {
	var ids []string
	err := p.s.read(ctx, "find abandoned pins", func(tx *sql.Tx) error {
		var list string
		err := tx.QueryRowContext(ctx, `SELECT json_group_array(id) FROM replay_batches WHERE state = 'pinning' AND updated_at < ?`,
			micros(before)).Scan(&list)
		if err != nil {
			return err
		}
		return json.Unmarshal([]byte(list), &ids)
	})
	return ids, err
}

func scanItem(r scanner, extra ...any) (quarantine.ReplayItem, error) {
	var (
		it               quarantine.ReplayItem
		outcome, dropped string
		published        sql.NullInt64
		upd              int64
	)
	dest := []any{&it.BatchID, &it.Seq, &it.MessageID, &it.Queue, &outcome, &it.Reason, &it.Destination,
		&it.IdempotencyKey, &it.PayloadVersion, &it.PayloadSHA256, &dropped, &it.Attempts, &it.RefailID,
		&published, &upd, &it.Refusals}
	if err := r.Scan(append(dest, extra...)...); err != nil {
		return it, err
	}
	it.Outcome, it.PublishedAt, it.UpdatedAt = quarantine.ItemOutcome(outcome), fromMicrosPtr(published), fromMicros(upd)
	if err := json.Unmarshal([]byte(dropped), &it.DroppedHeaders); err != nil {
		return it, err
	}
	return it, nil
}

func (p backend) Items(ctx context.Context, f quarantine.ReplayItemFilter, limit int) ([]quarantine.ReplayItem, bool, error) {
	q := `SELECT ` + replays.ItemColumns + ` FROM replay_items i WHERE i.batch_id = ? AND i.seq > ?`
	args := []any{f.BatchID, f.After}
	if len(f.Outcome) > 0 {
		q += ` AND i.outcome IN (SELECT value FROM json_each(?))`
		args = append(args, jsonArray(fields.Strings(f.Outcome)))
	}
	q += ` ORDER BY i.seq LIMIT ?`
	args = append(args, limit)
	out := []quarantine.ReplayItem{}
	found := false
	err := p.s.read(ctx, "list replay items", func(tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM replay_batches WHERE id = ?)`, f.BatchID).Scan(&found); err != nil || !found {
			return err
		}
		rows, err := tx.QueryContext(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			it, err := scanItem(rows)
			if err != nil {
				return err
			}
			out = append(out, it)
		}
		return rows.Err()
	})
	return out, found, err
}

// CheckIncident applies the incident guard to batch b (its items stored):
// the new dead letters of its queues within the guard's window, its own
// messages not counted.
func (t replayTx) CheckIncident(ctx context.Context, g *quarantine.IncidentGuard, b *quarantine.ReplayBatch, force bool, now time.Time) error {
	if g == nil || force {
		return nil
	}
	var pending int
	if err := t.tx.QueryRowContext(ctx, `SELECT count(*) FROM replay_items WHERE batch_id = ? AND outcome = 'pending'`, b.ID).Scan(&pending); err != nil {
		return err
	}
	if pending <= b.Canary {
		return nil
	}
	rows, err := t.tx.QueryContext(ctx, `SELECT m.queue, count(*) FROM messages m
		WHERE m.queue IN (SELECT DISTINCT queue FROM replay_items WHERE batch_id = :batch AND outcome = 'pending')
		AND m.collected_at >= :since
		AND NOT EXISTS (SELECT 1 FROM replay_items i WHERE i.batch_id = :batch AND i.message_id = m.id)
		GROUP BY m.queue`, sql.Named("batch", b.ID), sql.Named("since", micros(now.Add(-g.Window))))
	if err != nil {
		return err
	}
	defer rows.Close()
	inflow := map[string]int{}
	for rows.Next() {
		var q string
		var n int
		if err := rows.Scan(&q, &n); err != nil {
			return err
		}
		inflow[q] = n
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return g.Check(pending, b.Canary, force, inflow)
}

// CountReplays returns the number of batches in each state; see
// store.Replays. Errors: EUNAVAILABLE.
func (s *Store) CountReplays(ctx context.Context) (map[quarantine.ReplayState]int, error) {
	out := make(map[quarantine.ReplayState]int, len(quarantine.ReplayStates))
	for _, st := range quarantine.ReplayStates {
		out[st] = 0
	}
	err := s.read(ctx, "count replays", func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT state, count(*) FROM replay_batches GROUP BY state`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var st string
			var n int
			if err := rows.Scan(&st, &n); err != nil {
				return err
			}
			out[quarantine.ReplayState(st)] = n
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/quarantine-dev/quarantine"
)

// The moves a replay makes (quarantined -> replaying, replaying ->
// replayed, replaying -> quarantined) count their failure groups per
// group, in a few statements per set of messages, instead of by the
// status trigger's four statements per message: the trigger skips the
// UPDATE that status_moves.counted marks (migration 0007).

// movedGroup is what a set of messages moving together adds to, and takes
// from, one failure group (fingerprint, queue, owner).
type movedGroup struct {
	F       string `json:"f"`
	Q       string `json:"q"`
	O       string `json:"o"`
	Job     string `json:"j"`
	Class   string `json:"c"`
	Reason  string `json:"r"`
	N       int    `json:"n"`
	First   int64  `json:"first"`
	Last    int64  `json:"last"`
	Example string `json:"e"`
}

// moveWhere selects the messages among ids in status from. The unary +
// keeps the planner from the status index, which it would otherwise
// scan through every message in status from (all the quarantined ones)
// instead of looking the ids up.
const moveWhere = `
		WHERE id IN (SELECT value FROM json_each(:ids)) AND +status = :from`

// moveWhereRowid is moveWhere for rowids (a JSON array of integers) read
// in the same transaction: each message is found by its row, without a
// look-up of its id in the primary key's index.
const moveWhereRowid = `
		WHERE rowid IN (SELECT value FROM json_each(:ids)) AND +status = :from`

// moveStatus moves the messages among ids (a JSON array) whose status is
// from to status to, with updated_at = now and the extra assignments set
// (", replay_count = replay_count + 1"; may be empty), and moves their
// failure-group counts: the UPDATE returns the moved messages' groups,
// which are added to the groups of status to and taken from those of
// status from; a group of status from whose first message, or last one
// or example, moved has that bound recounted from the messages still in
// it (recountBounds).
func moveStatus(ctx context.Context, tx *sql.Tx, ids string, from, to, set string, now int64) error {
	_, err := moveStatusN(ctx, tx, ids, from, to, set, now)
	return err
}

// moveStatusN is moveStatus returning how many messages moved.
func moveStatusN(ctx context.Context, tx *sql.Tx, ids string, from, to, set string, now int64) (int, error) {
	return moveGroups(ctx, tx, ids, from, to, set, now)
}

// movedRow is one moved message as its failure group counts it.
type movedRow struct {
	F, Q, O, Job, Class, Reason string
	At                          int64
	ID                          string
}

// groupKey names a failure group of one status: fingerprint, queue, owner.
type groupKey struct{ f, q, o string }

// movedGroups are the moved messages by failure group.
type movedGroups struct {
	byKey map[groupKey]*movedGroup
	list  []*movedGroup
	n     int
}

// add counts m in its group.
func (gs *movedGroups) add(m movedRow) {
	k := groupKey{m.F, m.Q, m.O}
	g := gs.byKey[k]
	if g == nil {
		if gs.byKey == nil {
			gs.byKey = map[groupKey]*movedGroup{}
		}
		g = &movedGroup{F: m.F, Q: m.Q, O: m.O, Job: m.Job, Class: m.Class, Reason: m.Reason,
			First: m.At, Last: m.At, Example: m.ID}
		gs.byKey[k] = g
		gs.list = append(gs.list, g)
	}
	gs.n++
	g.N++
	g.Job, g.Class, g.Reason = min(g.Job, m.Job), min(g.Class, m.Class), min(g.Reason, m.Reason)
	g.First = min(g.First, m.At)
	if m.At > g.Last || (m.At == g.Last && m.ID > g.Example) {
		g.Last, g.Example = m.At, m.ID
	}
}

// setCounted marks (or unmarks) the UPDATEs of messages that follow as
// counted by the store: the failure-group trigger skips them (migration
// 0007).
func setCounted(ctx context.Context, tx *sql.Tx, counted bool) error {
	v := 0
	if counted {
		v = 1
	}
	_, err := tx.ExecContext(ctx, `UPDATE status_moves SET counted = ? WHERE id = 1`, v)
	return err
}

// moveGroups is moveStatusN. The UPDATE of messages is OR ROLLBACK:
// any failure ends the whole transaction, as a failed write does anyway,
// so that SQLite keeps no statement journal of the pages it changes
// (migration 0021: the status triggers hold no upsert, whose ABORT would
// keep it).
func moveGroups(ctx context.Context, tx *sql.Tx, ids string, from, to, set string, now int64) (int, error) {
	if err := setCounted(ctx, tx, true); err != nil {
		return 0, err
	}
	rows, err := tx.QueryContext(ctx, `UPDATE OR ROLLBACK messages SET status = :to, updated_at = :now`+set+moveWhere+`
		RETURNING fingerprint, queue, owner, job_name, failure_class, reason, failed_at, id`,
		sql.Named("ids", ids), sql.Named("from", from), sql.Named("to", to), sql.Named("now", now))
	if err != nil {
		return 0, err
	}
	var gs movedGroups
	for rows.Next() {
		var m movedRow
		if err := rows.Scan(&m.F, &m.Q, &m.O, &m.Job, &m.Class, &m.Reason, &m.At, &m.ID); err != nil {
			rows.Close()
			return 0, err
		}
		gs.add(m)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	if err := setCounted(ctx, tx, false); err != nil {
		return 0, err
	}
	return gs.n, gs.apply(ctx, tx, from, to, true)
}

// moveSelected is moveStatus for a chunk of a discard operation, of
// messages it read before in the same transaction: moved are their rows,
// all in status from, and rowids (a JSON array) their rowids
// (moveWhereRowid). Their groups are known, so the UPDATE returns
// nothing; it must move every one of them (EINTERNAL otherwise: the
// transaction is rolled back).
//
// The operation walks its set newest first, so that every chunk moves
// the last message of nearly every group it touches: the last bound and
// example of those groups (in status from) are left as they are, a
// message that left the group (later than the last one still in it),
// and recounted once, when the operation is over (repairLastBounds).
// Their counts and first bounds stay exact.
func moveSelected(ctx context.Context, tx *sql.Tx, rowids string, moved []movedRow, from, to, set string, now int64) error {
	if err := setCounted(ctx, tx, true); err != nil {
		return err
	}
	res, err := tx.ExecContext(ctx, `UPDATE OR ROLLBACK messages SET status = :to, updated_at = :now`+set+moveWhereRowid,
		sql.Named("ids", rowids), sql.Named("from", from), sql.Named("to", to), sql.Named("now", now))
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n != int64(len(moved)) {
		return quarantine.Errorf(quarantine.EINTERNAL, "moved %d of the %d messages selected (%v)", n, len(moved), err)
	}
	var gs movedGroups
	for _, m := range moved {
		gs.add(m)
	}
	if err := setCounted(ctx, tx, false); err != nil {
		return err
	}
	return gs.apply(ctx, tx, from, to, false)
}

// apply adds gs to the failure groups of status to and takes them from
// those of status from; a group of status from whose first message (with
// lastNow, or last one or example) moved has that bound recounted from
// the messages still in it (recountBounds).
func (gs *movedGroups) apply(ctx context.Context, tx *sql.Tx, from, to string, lastNow bool) error {
	if len(gs.list) == 0 {
		return nil
	}
	gj, err := json.Marshal(gs.list)
	if err != nil {
		return err
	}
	// jsonb_each: each element's value is handed to ->> as JSONB, which
	// it reads in place; json_each would turn every element back into
	// text for each ->> to parse again.
	const moved = `SELECT j.value->>'f' AS f, j.value->>'q' AS q, j.value->>'o' AS o, j.value->>'j' AS job,
		j.value->>'c' AS class, j.value->>'r' AS reason, j.value->>'n' AS k, j.value->>'first' AS first,
		j.value->>'last' AS last, j.value->>'e' AS e FROM jsonb_each(:groups) j`
	if _, err := tx.ExecContext(ctx, `INSERT INTO failure_groups (fingerprint, queue, owner, status, job_name,
		failure_class, reason, n, first_failed_at, last_failed_at, example_id)
		SELECT f, q, o, :to, job, class, reason, k, first, last, e FROM (`+moved+`) WHERE true
		`+addToGroup,
		sql.Named("groups", string(gj)), sql.Named("to", to)); err != nil {
		return fmt.Errorf("add to the failure groups: %w", err)
	}
	// Taken from the groups of status from, which return their bounds:
	// a group whose first (or last, or its example) moved is recounted.
	rows, err := tx.QueryContext(ctx, `UPDATE failure_groups SET n = failure_groups.n - d.k FROM (`+moved+`) AS d
		WHERE failure_groups.fingerprint = d.f AND failure_groups.queue = d.q AND failure_groups.owner = d.o
			AND failure_groups.status = :from
		RETURNING fingerprint, queue, owner, n, first_failed_at, last_failed_at`,
		sql.Named("groups", string(gj)), sql.Named("from", from))
	if err != nil {
		return fmt.Errorf("take from the failure groups: %w", err)
	}
	var firsts, lasts [][3]string
	for rows.Next() {
		var k groupKey
		var left int
		var first, last sql.NullInt64
		if err := rows.Scan(&k.f, &k.q, &k.o, &left, &first, &last); err != nil {
			rows.Close()
			return err
		}
		g := gs.byKey[k]
		if g == nil || left <= 0 {
			continue
		}
		if !first.Valid || g.First <= first.Int64 {
			firsts = append(firsts, [3]string{k.f, k.q, k.o})
		}
		if lastNow && (!last.Valid || g.Last >= last.Int64) {
			lasts = append(lasts, [3]string{k.f, k.q, k.o})
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("take from the failure groups: %w", err)
	}
	if err := recountBounds(ctx, tx, from, recountFirst, firsts); err != nil {
		return err
	}
	return recountBounds(ctx, tx, from, recountLast, lasts)
}

// The bounds of a failure group (fingerprint, queue, owner, status) g
// recounted from the messages still in it, through the queue-and-status
// index from the stored bound on (it was exact: no message of the group
// lies beyond it), so that the walk passes only the messages of the
// queue in that status between the old bound and the new one, not every
// message of the queue before it.
const (
	recountFirst = `first_failed_at = (SELECT m.failed_at FROM messages m INDEXED BY messages_queue_status
		WHERE m.queue = g.queue AND m.status = g.status AND m.failed_at >= ifnull(g.first_failed_at, -9223372036854775808)
			AND m.fingerprint = g.fingerprint AND m.owner = g.owner ORDER BY m.failed_at, m.id LIMIT 1)`
	recountLast = `(last_failed_at, example_id) = (SELECT m.failed_at, m.id FROM messages m INDEXED BY messages_queue_status
		WHERE m.queue = g.queue AND m.status = g.status AND m.failed_at <= ifnull(g.last_failed_at, 9223372036854775807)
			AND m.fingerprint = g.fingerprint AND m.owner = g.owner ORDER BY m.failed_at DESC, m.id DESC LIMIT 1)`
)

// recountBounds recounts one bound (set: recountFirst or recountLast) of
// the failure groups keys (fingerprint, queue, owner) in status from.
func recountBounds(ctx context.Context, tx *sql.Tx, from, set string, keys [][3]string) error {
	if len(keys) == 0 {
		return nil
	}
	kj, err := json.Marshal(keys)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `UPDATE failure_groups AS g SET `+set+` FROM json_each(:keys) j
		WHERE g.fingerprint = j.value->>0 AND g.queue = j.value->>1 AND g.owner = j.value->>2 AND g.status = :from`,
		sql.Named("keys", string(kj)), sql.Named("from", from))
	if err != nil {
		return fmt.Errorf("recount the failure groups' bounds: %w", err)
	}
	return nil
}

// repairLastBounds recounts the last bound and example of every failure
// group whose example is no longer in the group's status (left behind by
// moveSelected: the example is one of the messages that left).
// The stored bound is still an upper bound of the group, so the recount
// walks down from it (recountLast).
func repairLastBounds(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, `UPDATE failure_groups AS g SET `+recountLast+`
		WHERE g.n > 0 AND NOT EXISTS (SELECT 1 FROM messages e WHERE e.id = g.example_id AND e.status = g.status)`)
	if err != nil {
		return fmt.Errorf("recount the failure groups' last bounds: %w", err)
	}
	return nil
}

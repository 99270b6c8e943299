package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
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

// moveStatus moves the messages among ids (a JSON array) whose status is
// from to status to, with updated_at = now and the extra assignments set
// (", replay_count = replay_count + 1"; may be empty), and moves their
// failure-group counts: the UPDATE returns the moved messages' groups,
// which are added to the groups of status to and taken from those of
// status from, whose bounds and example are then recounted from the
// messages still in them (the queue-and-status index, twice per group:
// the first message, then the last one and the example together).
func moveStatus(ctx context.Context, tx *sql.Tx, ids string, from, to, set string, now int64) error {
	_, err := moveStatusN(ctx, tx, ids, from, to, set, now)
	return err
}

// moveStatusN is moveStatus returning how many messages moved.
func moveStatusN(ctx context.Context, tx *sql.Tx, ids string, from, to, set string, now int64) (int, error) {
	if _, err := tx.ExecContext(ctx, `UPDATE status_moves SET counted = 1 WHERE id = 1`); err != nil {
		return 0, err
	}
	rows, err := tx.QueryContext(ctx, `UPDATE messages SET status = :to, updated_at = :now`+set+moveWhere+`
		RETURNING fingerprint, queue, owner, job_name, failure_class, reason, failed_at, id`,
		sql.Named("ids", ids), sql.Named("from", from), sql.Named("to", to), sql.Named("now", now))
	if err != nil {
		return 0, err
	}
	type key struct{ f, q, o string }
	byKey := map[key]*movedGroup{}
	var groups []*movedGroup
	for rows.Next() {
		var m movedGroup
		var at int64
		var id string
		if err := rows.Scan(&m.F, &m.Q, &m.O, &m.Job, &m.Class, &m.Reason, &at, &id); err != nil {
			rows.Close()
			return 0, err
		}
		g := byKey[key{m.F, m.Q, m.O}]
		if g == nil {
			m.First, m.Last, m.Example = at, at, id
			g = &m
			byKey[key{m.F, m.Q, m.O}] = g
			groups = append(groups, g)
		}
		g.N++
		g.Job, g.Class, g.Reason = min(g.Job, m.Job), min(g.Class, m.Class), min(g.Reason, m.Reason)
		g.First = min(g.First, at)
		if at > g.Last || (at == g.Last && id > g.Example) {
			g.Last, g.Example = at, id
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE status_moves SET counted = 0 WHERE id = 1`); err != nil {
		return 0, err
	}
	n := 0
	for _, g := range groups {
		n += g.N
	}
	if len(groups) == 0 {
		return 0, nil
	}
	gj, err := json.Marshal(groups)
	if err != nil {
		return 0, err
	}
	const moved = `SELECT j.value->>'f' AS f, j.value->>'q' AS q, j.value->>'o' AS o, j.value->>'j' AS job,
		j.value->>'c' AS class, j.value->>'r' AS reason, j.value->>'n' AS k, j.value->>'first' AS first,
		j.value->>'last' AS last, j.value->>'e' AS e FROM json_each(:groups) j`
	if _, err := tx.ExecContext(ctx, `INSERT INTO failure_groups (fingerprint, queue, owner, status, job_name,
		failure_class, reason, n, first_failed_at, last_failed_at, example_id)
		SELECT f, q, o, :to, job, class, reason, k, first, last, e FROM (`+moved+`) WHERE true
		`+addToGroup,
		sql.Named("groups", string(gj)), sql.Named("to", to)); err != nil {
		return 0, fmt.Errorf("add to the failure groups: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE failure_groups SET n = failure_groups.n - d.k FROM (`+moved+`) AS d
		WHERE failure_groups.fingerprint = d.f AND failure_groups.queue = d.q AND failure_groups.owner = d.o
			AND failure_groups.status = :from`,
		sql.Named("groups", string(gj)), sql.Named("from", from)); err != nil {
		return 0, fmt.Errorf("take from the failure groups: %w", err)
	}
	const in = `FROM messages m WHERE m.queue = g.queue AND m.status = g.status AND m.fingerprint = g.fingerprint
		AND m.owner = g.owner`
	_, err = tx.ExecContext(ctx, `UPDATE failure_groups AS g SET
		first_failed_at = (SELECT m.failed_at `+in+` ORDER BY m.failed_at, m.id LIMIT 1),
		(last_failed_at, example_id) = (SELECT m.failed_at, m.id `+in+` ORDER BY m.failed_at DESC, m.id DESC LIMIT 1)
		WHERE (g.fingerprint, g.queue, g.owner, g.status) IN (SELECT f.fingerprint, f.queue, f.owner, f.status
			FROM json_each(:groups) j JOIN failure_groups f ON f.fingerprint = j.value->>'f' AND f.queue = j.value->>'q'
				AND f.owner = j.value->>'o' AND f.status = :from
			WHERE j.value->>'first' <= f.first_failed_at OR j.value->>'last' >= f.last_failed_at) AND g.n > 0`,
		sql.Named("from", from), sql.Named("groups", string(gj)))
	return n, err
}

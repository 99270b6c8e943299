package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"slices"
	"strings"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/fields"
	"github.com/quarantine-dev/quarantine/store/internal/search"
)

// latestOffset makes a stored failed_at (unix microseconds) non-negative
// for every date from the year -1199 on, so that a zero-padded decimal of
// it sorts like the time.
const latestOffset = "100000000000000000"

// latestKey is a fixed-width text of m.failed_at followed by the id: its
// maximum (minimum) over a group names the latest (earliest) failure by
// (failed_at, id) without sorting the group.
const latestKey = `printf('%020d', m.failed_at + ` + latestOffset + `) || m.id`

// Failure groups: failure_groups keeps one row per (fingerprint, queue,
// owner, status) with its count, bounds and latest failure (migration
// 0002). A filter on those fields, or on job_name and failure_class (which
// the fingerprint determines), reads it; any other filter groups the
// matching messages.

// groupsWhere is the condition of a groupable filter
// (fields.Groupable) on failure_groups g.
func groupsWhere(f quarantine.Filter) (string, []any) {
	conds := []string{"g.n > 0"}
	var args []any
	for _, e := range fields.Groups(&f, "g") {
		if len(e.Values) > 0 {
			conds = append(conds, e.Column+" IN (SELECT value FROM json_each(?))")
			args = append(args, jsonArray(e.Values))
		}
	}
	return " WHERE " + strings.Join(conds, " AND "), args
}

// groupsQuery returns the SQL and arguments of Groups: fingerprint, count,
// first and last failed_at, queues (a JSON array), example, job name,
// failure class and a reason of each group, largest first.
func groupsQuery(f quarantine.Filter) (string, []any) {
	if fields.Groupable(&f) {
		w, args := groupsWhere(f)
		return `SELECT g.fingerprint, sum(g.n), min(g.first_failed_at), max(g.last_failed_at), json_group_array(DISTINCT g.queue),
	substr(max(printf('%020d', g.last_failed_at + ` + latestOffset + `) || g.example_id), 21),
	min(g.job_name), min(g.failure_class), min(g.reason)
FROM failure_groups g` + w + `
GROUP BY g.fingerprint ORDER BY 2 DESC, 4 DESC, 1 LIMIT ?`, append(args, f.Limit)
	}
	w, args := where(f, false)
	return `SELECT m.fingerprint, count(*), min(m.failed_at), max(m.failed_at), json_group_array(DISTINCT m.queue),
	substr(max(` + latestKey + `), 21), min(m.job_name), min(m.failure_class), min(m.reason)
FROM messages m` + w + `
GROUP BY m.fingerprint ORDER BY 2 DESC, 4 DESC, 1 LIMIT ?`, append(args, f.Limit)
}

// addToGroup is the tail of an INSERT INTO failure_groups (…) of counts
// to add: a group already stored adds n, and keeps the earlier first
// failure, the later last failure and its example (a group at n <= 0
// takes the new ones).
const addToGroup = `ON CONFLICT (fingerprint, queue, owner, status) DO UPDATE SET
	n = n + excluded.n,
	first_failed_at = CASE WHEN n <= 0 OR excluded.first_failed_at < first_failed_at
		THEN excluded.first_failed_at ELSE first_failed_at END,
	last_failed_at = CASE WHEN n <= 0 OR excluded.last_failed_at > last_failed_at
		THEN excluded.last_failed_at ELSE last_failed_at END,
	example_id = CASE WHEN n <= 0 OR excluded.last_failed_at > last_failed_at
		OR (excluded.last_failed_at = last_failed_at AND excluded.example_id > example_id)
		THEN excluded.example_id ELSE example_id END`

// foldGroups adds the new messages msgs[idx] to failure_groups, one upsert
// per bucket, inside tx.
func foldGroups(ctx context.Context, tx *sql.Tx, msgs []*quarantine.Message, idx []int) error {
	type key struct{ fp, queue, owner, status string }
	type agg struct {
		job, class, reason string
		n                  int64
		first, last        int64
		example            string
	}
	buckets := map[key]*agg{}
	var keys []key
	for _, i := range idx {
		m := msgs[i]
		k := key{m.Fingerprint, m.Queue, m.Owner, string(m.Status)}
		at := micros(m.FailedAt)
		a := buckets[k]
		if a == nil {
			a = &agg{job: m.JobName, class: string(m.FailureClass), reason: m.Reason, first: at, last: at, example: m.ID}
			buckets[k] = a
			keys = append(keys, k)
		} else {
			a.first = min(a.first, at)
			if at > a.last || at == a.last && m.ID > a.example {
				a.last, a.example = at, m.ID
			}
		}
		a.n++
	}
	if len(keys) == 0 {
		return nil
	}
	up, err := tx.PrepareContext(ctx, `INSERT INTO failure_groups (fingerprint, queue, owner, status, job_name,
		failure_class, reason, n, first_failed_at, last_failed_at, example_id)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	`+addToGroup)
	if err != nil {
		return err
	}
	defer up.Close()
	for _, k := range keys {
		a := buckets[k]
		if _, err := up.ExecContext(ctx, k.fp, k.queue, k.owner, k.status, a.job, a.class, a.reason,
			a.n, a.first, a.last, a.example); err != nil {
			return err
		}
	}
	return nil
}

// Groups returns the failure groups of the messages matching f, largest
// first; see store.Store. Reason is the normalised reason and ExampleID
// the latest failure of the group, by (failed_at, id). Errors: EINVALID
// naming the field, EUNAVAILABLE.
func (s *Store) Groups(ctx context.Context, f quarantine.Filter) ([]quarantine.Group, error) {
	f.After = nil
	if err := search.Checked(ctx, &f, s.searchReady); err != nil {
		return nil, err
	}
	q, args := groupsQuery(f)
	out := []quarantine.Group{}
	err := s.read(ctx, "group messages", func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var g quarantine.Group
			var first, last int64
			var queues, reason, class string
			if err := rows.Scan(&g.Fingerprint, &g.Count, &first, &last, &queues, &g.ExampleID, &g.JobName, &class, &reason); err != nil {
				return err
			}
			if err := json.Unmarshal([]byte(queues), &g.Queues); err != nil {
				return err
			}
			slices.Sort(g.Queues)
			g.FirstFailedAt, g.LastFailedAt = fromMicros(first), fromMicros(last)
			g.FailureClass, g.Reason = quarantine.FailureClass(class), quarantine.NormalizeReason(reason)
			out = append(out, g)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/fields"
	"github.com/quarantine-dev/quarantine/store/internal/search"
)

// Failure groups. Migration 0002 keeps failure_groups, one row per
// (fingerprint, queue, owner, status) with its count, bounds and latest
// failure, in the transaction of every insert (InsertBatch) and status
// change (a trigger).
// A filter on those fields, or on job_name and failure_class (which the
// fingerprint determines), reads that table: a few rows per group however
// many messages each holds. Any other filter (source, idempotency key,
// time, text) groups the matching messages.

// groupsWhere is the condition of a groupable filter
// (fields.Groupable) on failure_groups m.
func groupsWhere(f *quarantine.Filter) *where {
	w := &where{conds: []string{"m.n > 0"}}
	w.eqs(fields.Groups(f, "m"), "m.failure_class", "m.status")
	return w
}

// latestID is the aggregate giving the id of the latest failure, by
// (failed_at, id), of the grouped messages m: the maximum of a fixed-width
// timestamp followed by the id, without sorting the group.
const latestID = `substr(max(to_char(m.failed_at AT TIME ZONE 'UTC', 'YYYYMMDDHH24MISSUS') || m.id COLLATE "C"), 21)`

// groupsQuery returns the SQL and arguments of Groups for a validated
// filter: fingerprint, count, first and last failed_at, queues, example,
// job name, failure class and a reason of the group.
func groupsQuery(f *quarantine.Filter) (string, []any) {
	if fields.Groupable(f) {
		w := groupsWhere(f)
		return `SELECT m.fingerprint, sum(m.n)::bigint, min(m.first_failed_at), max(m.last_failed_at),
	array_agg(DISTINCT m.queue ORDER BY m.queue),
	(array_agg(m.example_id ORDER BY m.last_failed_at DESC, m.example_id DESC))[1],
	min(m.job_name), min(m.failure_class), min(m.reason)
FROM failure_groups m` + w.sql() + `
GROUP BY m.fingerprint ORDER BY 2 DESC, 4 DESC, 1 LIMIT ` + w.arg(f.Limit), w.args
	}
	w := filterWhere(f)
	return `SELECT m.fingerprint, count(*), min(m.failed_at), max(m.failed_at),
	array_agg(DISTINCT m.queue ORDER BY m.queue), ` + latestID + `,
	min(m.job_name), min(m.failure_class), min(m.reason)
FROM messages m` + w.sql() + `
GROUP BY m.fingerprint ORDER BY 2 DESC, 4 DESC, 1 LIMIT ` + w.arg(f.Limit), w.args
}

// Groups returns the failure groups of the messages matching f, largest
// first; see store.Store. Reason is the normalised reason
// (quarantine.NormalizeReason) and ExampleID the latest failure of the
// group, by (failed_at, id). Errors: EINVALID naming the field,
// EUNAVAILABLE, EINTERNAL.
func (s *Store) Groups(ctx context.Context, f quarantine.Filter) ([]quarantine.Group, error) {
	f.After = nil
	if err := search.Checked(ctx, &f, s.searchReady); err != nil {
		return nil, err
	}
	q, args := groupsQuery(&f)
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, translate(err, "group messages")
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (quarantine.Group, error) {
		var g quarantine.Group
		var reason string
		err := row.Scan(&g.Fingerprint, &g.Count, &g.FirstFailedAt, &g.LastFailedAt, &g.Queues,
			&g.ExampleID, &g.JobName, &g.FailureClass, &reason)
		g.FirstFailedAt, g.LastFailedAt = g.FirstFailedAt.UTC(), g.LastFailedAt.UTC()
		g.Reason = quarantine.NormalizeReason(reason)
		return g, err
	})
	if err != nil {
		return nil, translate(err, "group messages")
	}
	if out == nil {
		out = []quarantine.Group{}
	}
	return out, nil
}

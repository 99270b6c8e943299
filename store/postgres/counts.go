package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/fields"
	"github.com/quarantine-dev/quarantine/store/internal/search"
)

// Counts by queue and status are sums of the buckets of failure_groups
// (group.go), kept in the transaction of every insert and status change:
// counting ten million messages reads a few thousand rows. A filter on
// other fields than those of the buckets counts the matching messages.

// statsQuery returns the counts by queue and status of the buckets
// matching a groupable filter.
func statsQuery(f *quarantine.Filter) (string, []any) {
	w := groupsWhere(f)
	return "SELECT m.queue, m.status, sum(m.n)::bigint FROM failure_groups m" + w.sql() +
		" GROUP BY m.queue, m.status ORDER BY m.queue, m.status", w.args
}

// countQuery returns the SQL and arguments of CountByQueue.
func countQuery(f *quarantine.Filter) (string, []any) {
	if fields.Groupable(f) {
		return statsQuery(f)
	}
	w := filterWhere(f)
	q := "SELECT m.queue, m.status, count(*) FROM messages m" + w.sql() +
		" GROUP BY m.queue, m.status ORDER BY m.queue, m.status"
	return q, w.args
}

// CountByQueue counts the messages matching f by queue and status; see
// store.Store. Errors: EINVALID naming the field, EUNAVAILABLE, EINTERNAL.
func (s *Store) CountByQueue(ctx context.Context, f quarantine.Filter) ([]quarantine.QueueCount, error) {
	if err := search.WholeSet(ctx, &f, s.searchReady); err != nil {
		return nil, err
	}
	q, args := countQuery(&f)
	counts, err := queryCounts(ctx, s.pool, q, args)
	if err != nil {
		return nil, translate(err, "count messages")
	}
	return counts, nil
}

// queryCounts runs a query of (queue, status, count) rows.
func queryCounts(ctx context.Context, db interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, q string, args []any) ([]quarantine.QueueCount, error) {
	rows, err := db.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	counts, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (quarantine.QueueCount, error) {
		var c quarantine.QueueCount
		err := row.Scan(&c.Queue, &c.Status, &c.Count)
		return c, err
	})
	if err != nil {
		return nil, err
	}
	if counts == nil {
		counts = []quarantine.QueueCount{}
	}
	return counts, nil
}

// oldestQuarantined takes the queues holding quarantined messages from
// failure_groups, then the first quarantined message of each in (failed_at,
// id) order: one probe of messages_queue_status_idx per queue, however
// many messages each holds.
const oldestQuarantined = `SELECT q.queue, o.id, o.failed_at
FROM (SELECT DISTINCT queue FROM failure_groups WHERE status = 'quarantined' AND n > 0) q
CROSS JOIN LATERAL (
	SELECT m.id, m.failed_at FROM messages m
	WHERE m.queue = q.queue AND m.status = 'quarantined'
	ORDER BY m.failed_at, m.id LIMIT 1
) o
ORDER BY q.queue`

// OldestQuarantined returns the oldest quarantined message of each queue;
// see store.Store. Errors: EUNAVAILABLE, EINTERNAL.
func (s *Store) OldestQuarantined(ctx context.Context) ([]quarantine.QueueOldest, error) {
	rows, err := s.pool.Query(ctx, oldestQuarantined)
	if err != nil {
		return nil, translate(err, "find the oldest messages")
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (quarantine.QueueOldest, error) {
		var o quarantine.QueueOldest
		err := row.Scan(&o.Queue, &o.MessageID, &o.FailedAt)
		o.FailedAt = o.FailedAt.UTC()
		return o, err
	})
	if err != nil {
		return nil, translate(err, "find the oldest messages")
	}
	if out == nil {
		out = []quarantine.QueueOldest{}
	}
	return out, nil
}

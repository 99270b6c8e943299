package sqlite

import (
	"context"
	"database/sql"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/fields"
)

// where builds the WHERE clause of f over messages m (cursor included when
// withCursor). Values are always bound, never spliced into the SQL.
func where(f quarantine.Filter, withCursor bool) (string, []any) {
	return whereText(f, withCursor, false)
}

// whereText is where, with the text tested message by message (probe) or
// found through the index (text.go).
func whereText(f quarantine.Filter, withCursor, probe bool) (string, []any) {
	var c clause
	for _, e := range fields.Messages(&f) {
		c.in(e.Column, e.Values)
	}
	c.between("m.failed_at", f.FailedAfter, f.FailedBefore)
	if f.Text != "" {
		cond, args := textCond(f.Text, probe) // text.go
		c.add(cond, args...)
	}
	if withCursor && f.After != nil {
		c.add("(m.failed_at, m.id) < (?, ?)", micros(f.After.FailedAt), f.After.ID)
	}
	return c.where(), c.args
}

// listQuery returns the SQL and arguments of one page of f, read in index
// order (a text is tested message by message: see listText).
func listQuery(f quarantine.Filter) (string, []any) {
	w, args := whereText(f, true, true)
	return `SELECT ` + messageColumns + ` FROM messages m` + w +
		` ORDER BY m.failed_at DESC, m.id DESC LIMIT ?`, append(args, f.Limit+1)
}

// ListMessages returns one page of the messages matching f, newest first;
// see store.Store. EINVALID for a bad filter.
func (s *Store) ListMessages(ctx context.Context, f quarantine.Filter) (quarantine.MessagePage, error) {
	if err := f.Validate(); err != nil {
		return quarantine.MessagePage{}, err
	}
	var page quarantine.MessagePage
	var err error
	if f.Text != "" {
		page.Messages, err = s.listText(ctx, f)
	} else {
		q, args := listQuery(f)
		err = s.read(ctx, "list messages", func(tx *sql.Tx) error {
			page.Messages, err = queryMessages(ctx, tx, q, args)
			return err
		})
	}
	if err != nil {
		return quarantine.MessagePage{}, err
	}
	if len(page.Messages) > f.Limit {
		page.Messages = page.Messages[:f.Limit]
		page.Next = quarantine.CursorOf(page.Messages[f.Limit-1])
	}
	return page, nil
}

// countQuery returns the SQL and arguments of CountByQueue: sums of the
// buckets of failure_groups when they answer f, a count of the matching
// messages otherwise.
func countQuery(f quarantine.Filter) (string, []any) {
	if fields.Groupable(&f) {
		w, args := groupsWhere(f)
		return `SELECT g.queue, g.status, sum(g.n) FROM failure_groups g` + w +
			` GROUP BY g.queue, g.status ORDER BY g.queue, g.status`, args
	}
	w, args := where(f, false)
	return `SELECT m.queue, m.status, count(*) FROM messages m` + w +
		` GROUP BY m.queue, m.status ORDER BY m.queue, m.status`, args
}

// CountByQueue counts the messages matching f per queue and status; see
// store.Store. EINVALID for a bad filter.
func (s *Store) CountByQueue(ctx context.Context, f quarantine.Filter) ([]quarantine.QueueCount, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	if err := s.searchReady(ctx, f.Text); err != nil {
		return nil, err
	}
	q, args := countQuery(f)
	var out []quarantine.QueueCount
	err := s.read(ctx, "count messages", func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var c quarantine.QueueCount
			var st string
			if err := rows.Scan(&c.Queue, &st, &c.Count); err != nil {
				return err
			}
			c.Status = quarantine.Status(st)
			out = append(out, c)
		}
		return rows.Err()
	})
	return out, err
}

// oldestQuery walks the distinct queues through the index (a loose index
// scan: one seek per queue) and takes each queue's first quarantined
// message by (failed_at, id).
const oldestQuery = `WITH RECURSIVE q(queue) AS (
	SELECT min(queue) FROM messages
	UNION ALL
	SELECT (SELECT min(m.queue) FROM messages m WHERE m.queue > q.queue) FROM q WHERE q.queue IS NOT NULL
)
SELECT o.queue, o.id, o.failed_at FROM q
JOIN messages o ON o.id = (
	SELECT m.id FROM messages m WHERE m.queue = q.queue AND m.status = 'quarantined'
	ORDER BY m.failed_at, m.id LIMIT 1)
WHERE q.queue IS NOT NULL
ORDER BY o.queue`

// OldestQuarantined returns each queue's oldest quarantined message; see
// store.Store.
func (s *Store) OldestQuarantined(ctx context.Context) ([]quarantine.QueueOldest, error) {
	var out []quarantine.QueueOldest
	err := s.read(ctx, "find the oldest messages", func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, oldestQuery)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var o quarantine.QueueOldest
			var at int64
			if err := rows.Scan(&o.Queue, &o.MessageID, &at); err != nil {
				return err
			}
			o.FailedAt = fromMicros(at)
			out = append(out, o)
		}
		return rows.Err()
	})
	return out, err
}

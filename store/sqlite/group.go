package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"slices"

	"github.com/quarantine-dev/quarantine"
)

// latestOffset makes a stored failed_at (unix microseconds) non-negative
// for every date from the year -1199 on, so that a zero-padded decimal of
// it sorts like the time.
const latestOffset = "100000000000000000"

// latestKey is a fixed-width text of m.failed_at followed by the id: its
// maximum (minimum) over a group names the latest (earliest) failure by
// (failed_at, id) without sorting the group.
const latestKey = `printf('%020d', m.failed_at + ` + latestOffset + `) || m.id`

// groupsQuery returns the SQL and arguments of Groups: the matching
// messages grouped by fingerprint, largest first.
func groupsQuery(f quarantine.Filter) (string, []any) {
	w, args := where(f, false)
	return `SELECT m.fingerprint, count(*), min(m.failed_at), max(m.failed_at), json_group_array(DISTINCT m.queue),
	substr(max(` + latestKey + `), 21), min(m.job_name), min(m.failure_class), min(m.reason)
FROM messages m` + w + `
GROUP BY m.fingerprint ORDER BY 2 DESC, 4 DESC, 1 LIMIT ?`, append(args, f.Limit)
}

// Groups returns the failure groups of the messages matching f, largest
// first; see store.Store. Reason is the normalised reason and ExampleID
// the latest failure of the group, by (failed_at, id). The embedded store
// groups the matching messages on every call. Errors: EINVALID naming the
// field, EUNAVAILABLE.
func (s *Store) Groups(ctx context.Context, f quarantine.Filter) ([]quarantine.Group, error) {
	f.After = nil
	if err := f.Validate(); err != nil {
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

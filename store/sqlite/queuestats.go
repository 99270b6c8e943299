package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// QueueStats returns, per queue with messages matching f, the counts by
// status (every status, zero included), the oldest quarantined message
// and the inflow in (now-5m, now], (now-1h, now] and (now-24h, now] by
// collected_at; see store.Store. Owner is left empty. One grouping of the
// matching messages, in one snapshot. Errors: EINVALID naming the field,
// EUNAVAILABLE.
func (s *Store) QueueStats(ctx context.Context, f quarantine.Filter, now time.Time) ([]quarantine.QueueStats, error) {
	f.After, f.Limit = nil, 0
	if err := f.Validate(); err != nil {
		return nil, err
	}
	n := micros(now)
	inflow := []any{micros(now.Add(-5 * time.Minute)), n, micros(now.Add(-time.Hour)), n, micros(now.Add(-24 * time.Hour)), n}
	w, args := where(f, false)
	q := `SELECT m.queue, m.status, count(*),
		min(m.failed_at) FILTER (WHERE m.status = 'quarantined'),
		substr(min(` + latestKey + `) FILTER (WHERE m.status = 'quarantined'), 21),
		count(*) FILTER (WHERE m.collected_at > ? AND m.collected_at <= ?),
		count(*) FILTER (WHERE m.collected_at > ? AND m.collected_at <= ?),
		count(*) FILTER (WHERE m.collected_at > ? AND m.collected_at <= ?)
	FROM messages m` + w + ` GROUP BY m.queue, m.status ORDER BY m.queue, m.status`
	out := []quarantine.QueueStats{}
	err := s.read(ctx, "compute queue statistics", func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, q, append(inflow, args...)...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var queue, status string
			var count, in5, in1, in24 int64
			var oldestAt sql.NullInt64
			var oldestID sql.NullString
			if err := rows.Scan(&queue, &status, &count, &oldestAt, &oldestID, &in5, &in1, &in24); err != nil {
				return err
			}
			if len(out) == 0 || out[len(out)-1].Queue != queue {
				st := quarantine.QueueStats{Queue: queue, Counts: make(map[quarantine.Status]int64, len(quarantine.Statuses))}
				for _, s := range quarantine.Statuses {
					st.Counts[s] = 0
				}
				out = append(out, st)
			}
			st := &out[len(out)-1]
			st.Counts[quarantine.Status(status)] = count
			if oldestAt.Valid && oldestID.Valid {
				at := fromMicros(oldestAt.Int64)
				st.OldestQuarantinedAt, st.OldestID = &at, oldestID.String
			}
			st.Inflow5m += in5
			st.Inflow1h += in1
			st.Inflow24h += in24
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

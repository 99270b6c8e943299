package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/fields"
	"github.com/quarantine-dev/quarantine/store/internal/hours"
	"github.com/quarantine-dev/quarantine/store/internal/queuestats"
	"github.com/quarantine-dev/quarantine/store/internal/search"
)

// QueueStats returns, per queue with messages matching f, the counts by
// status (every status, zero included), the oldest quarantined message
// and the inflow in (end-5m, end], (end-1h, end] and (end-24h, end] by
// collected_at, where end is the end of the minute holding now
// (hours.WindowEnd); see store.Store. Owner is left empty. With no
// filter, or one on queue, owner and status only, the counts come from
// failure_groups, the oldest from one probe of messages_queue_status per
// queue and the inflow from the kept hourly and per-minute counts
// (inflowHistogram); any other filter groups the matching messages. The
// statuses of f select the queues and the counts, not the inflow: it is
// what was collected, whatever its status now. One snapshot. Errors:
// EINVALID naming the field, EUNAVAILABLE.
func (s *Store) QueueStats(ctx context.Context, f quarantine.Filter, now time.Time) ([]quarantine.QueueStats, error) {
	if err := search.WholeSet(ctx, &f, s.searchReady); err != nil {
		return nil, err
	}
	var out []quarantine.QueueStats
	err := s.read(ctx, "compute queue statistics", func(tx *sql.Tx) error {
		var err error
		if fields.Groupable(&f) && len(f.JobName) == 0 && len(f.FailureClass) == 0 && len(f.Fingerprint) == 0 {
			out, err = queueStatsKept(ctx, tx, f, now, hours.Usable(s.clock()))
		} else {
			out, err = queueStatsScan(ctx, tx, f, now)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// inflowArgs are the bounds of the three inflow windows, each as (since,
// end) pairs, end the end of the minute holding now (hours.WindowEnd).
func inflowArgs(now time.Time) []any {
	end := hours.WindowEnd(now)
	n := micros(end)
	return []any{micros(end.Add(-hours.InflowWindows[0])), n, micros(end.Add(-hours.InflowWindows[1])), n, micros(end.Add(-hours.InflowWindows[2])), n}
}

// queueStatsKept reads the counts of failure_groups, then probes each
// queue for its oldest quarantined message and its inflow.
func queueStatsKept(ctx context.Context, tx *sql.Tx, f quarantine.Filter, now, usable time.Time) ([]quarantine.QueueStats, error) {
	q, args := countQuery(f)
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	out := []quarantine.QueueStats{}
	for rows.Next() {
		var queue, status string
		var n int64
		if err := rows.Scan(&queue, &status, &n); err != nil {
			rows.Close()
			return nil, err
		}
		if len(out) == 0 || out[len(out)-1].Queue != queue {
			out = append(out, queuestats.New(queue))
		}
		out[len(out)-1].Counts[quarantine.Status(status)] = n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	owner, ownerArgs := "", []any{}
	if len(f.Owner) > 0 {
		owner, ownerArgs = " AND m.owner IN (SELECT value FROM json_each(?))", []any{jsonArray(f.Owner)}
	}
	oldest := `SELECT m.id, m.failed_at FROM messages m WHERE m.queue = ? AND m.status = 'quarantined'` + owner +
		` ORDER BY m.failed_at, m.id LIMIT 1`
	queues := make([]string, len(out))
	for i := range out {
		st := &out[i]
		queues[i] = st.Queue
		if st.Counts[quarantine.StatusQuarantined] == 0 {
			continue
		}
		var id string
		var at int64
		err := tx.QueryRowContext(ctx, oldest, append([]any{st.Queue}, ownerArgs...)...).Scan(&id, &at)
		if noRows(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		t := fromMicros(at)
		st.OldestID, st.OldestQuarantinedAt = id, &t
	}
	if len(out) == 0 {
		return out, nil
	}
	edges, hs := hours.InflowBuckets(now, len(out))
	r := quarantine.HistogramRequest{Kind: quarantine.HistogramInflow, Queues: queues, Owners: f.Owner, Edges: edges}
	inOwner := ""
	if len(f.Owner) > 0 {
		inOwner = " AND owner IN (SELECT value FROM json_each(?))"
	}
	if err := inflowHistogram(ctx, tx, r, inOwner, ownerArgs, usable, hs); err != nil {
		return nil, err
	}
	hours.SetInflow(out, hs)
	return out, nil
}

// queueStatsScan groups the messages matching f but its statuses by
// queue and status: the queues and counts are those of the statuses of
// f, the inflow every status's.
func queueStatsScan(ctx context.Context, tx *sql.Tx, f quarantine.Filter, now time.Time) ([]quarantine.QueueStats, error) {
	anyStatus := f
	anyStatus.Status = nil
	w, args := where(anyStatus, false)
	q := `SELECT m.queue, m.status, count(*),
		min(m.failed_at) FILTER (WHERE m.status = 'quarantined'),
		substr(min(` + latestKey + `) FILTER (WHERE m.status = 'quarantined'), 21),
		count(*) FILTER (WHERE m.collected_at > ? AND m.collected_at <= ?),
		count(*) FILTER (WHERE m.collected_at > ? AND m.collected_at <= ?),
		count(*) FILTER (WHERE m.collected_at > ? AND m.collected_at <= ?)
	FROM messages m` + w + ` GROUP BY m.queue, m.status ORDER BY m.queue, m.status`
	rows, err := tx.QueryContext(ctx, q, append(inflowArgs(now), args...)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	scan := queuestats.NewScan(f.Status)
	for rows.Next() {
		var r queuestats.Row
		var status string
		var oldestAt sql.NullInt64
		var oldestID sql.NullString
		if err := rows.Scan(&r.Queue, &status, &r.Count, &oldestAt, &oldestID, &r.In5m, &r.In1h, &r.In24h); err != nil {
			return nil, err
		}
		r.Status = quarantine.Status(status)
		if oldestAt.Valid && oldestID.Valid {
			at := fromMicros(oldestAt.Int64)
			r.OldestAt, r.OldestID = &at, &oldestID.String
		}
		scan.Add(r)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return scan.Stats(), nil
}

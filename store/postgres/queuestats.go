package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/fields"
	"github.com/quarantine-dev/quarantine/store/internal/hours"
	"github.com/quarantine-dev/quarantine/store/internal/queuestats"
	"github.com/quarantine-dev/quarantine/store/internal/search"
)

// Queue statistics. With no filter, or one on queue, owner and status only, the
// counts come from failure_groups (group.go), the oldest quarantined
// message from one probe of messages_queue_status_idx per queue, and the
// inflow from the kept hourly and per-minute counts (inflow_hours,
// inflow_minutes; see inflowHistogram): the cost grows with the number of
// queues, not with the size of the store nor with the inflow. Any other
// filter aggregates the matching messages.

// statsOnly reports whether the maintained path answers f: a filter on
// queue, owner and status at most. The status selects the queues and
// the counts, not the inflow (what was collected, whatever its status
// now), so the kept inflow counts answer it too, rather than counting a
// burst row by row (docs/benchmarks.md, BenchmarkBinaryBurst).
func statsOnly(f *quarantine.Filter) bool {
	return fields.Groupable(f) && len(f.JobName) == 0 && len(f.FailureClass) == 0 && len(f.Fingerprint) == 0
}

// QueueStats returns, per queue with messages matching f, the counts by
// status (every status, zero included), the oldest quarantined message
// and the inflow in (end-5m, end], (end-1h, end] and (end-24h, end] by
// collected_at, where end is the end of the minute holding now
// (hours.WindowEnd); see store.Store. Owner is left empty. All is read in one
// snapshot. Errors: EINVALID naming the field, EUNAVAILABLE, EINTERNAL.
func (s *Store) QueueStats(ctx context.Context, f quarantine.Filter, now time.Time) ([]quarantine.QueueStats, error) {
	if err := search.WholeSet(ctx, &f, s.searchReady); err != nil {
		return nil, err
	}
	now = now.UTC()
	var out []quarantine.QueueStats
	err := s.snapshot(ctx, "compute queue statistics", func(tx pgx.Tx) error {
		var err error
		if statsOnly(&f) {
			out, err = queueStatsKept(ctx, tx, &f, now, hours.Usable(s.clock()))
		} else {
			out, err = queueStatsScan(ctx, tx, &f, now)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// queueStatsKept reads the maintained counts, then probes the oldest and
// the inflow of each queue.
func queueStatsKept(ctx context.Context, tx pgx.Tx, f *quarantine.Filter, now, usable time.Time) ([]quarantine.QueueStats, error) {
	q, args := statsQuery(f)
	counts, err := queryCounts(ctx, tx, q, args)
	if err != nil {
		return nil, err
	}
	var out []quarantine.QueueStats
	var queues []string
	for _, c := range counts {
		if len(out) == 0 || out[len(out)-1].Queue != c.Queue {
			out = append(out, queuestats.New(c.Queue))
			queues = append(queues, c.Queue)
		}
		out[len(out)-1].Counts[c.Status] = c.Count
	}
	if len(out) == 0 {
		return []quarantine.QueueStats{}, nil
	}
	w := &where{}
	qs := w.arg(queues)
	w.in("m.owner", f.Owner)
	owner := ""
	if len(w.conds) > 0 {
		owner = " AND " + w.conds[0]
	}
	rows, err := tx.Query(ctx, `SELECT q.queue, o.id, o.failed_at
		FROM unnest(`+qs+`::text[]) WITH ORDINALITY AS q(queue, i)
		LEFT JOIN LATERAL (
			SELECT m.id, m.failed_at FROM messages m
			WHERE m.queue = q.queue AND m.status = 'quarantined'`+owner+`
			ORDER BY m.failed_at, m.id LIMIT 1) o ON true
		ORDER BY q.i`, w.args...)
	if err != nil {
		return nil, err
	}
	i := 0
	var queue string
	var oldest *string
	var oldestAt *time.Time
	_, err = pgx.ForEachRow(rows, []any{&queue, &oldest, &oldestAt}, func() error {
		st := &out[i]
		i++
		// None counted: the filter's statuses leave quarantined out.
		if oldest != nil && oldestAt != nil && st.Counts[quarantine.StatusQuarantined] > 0 {
			at := oldestAt.UTC()
			st.OldestID, st.OldestQuarantinedAt = *oldest, &at
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	edges, hs := hours.InflowBuckets(now, len(queues))
	r := quarantine.HistogramRequest{Kind: quarantine.HistogramInflow, Queues: queues, Owners: f.Owner, Edges: edges}
	if err := inflowHistogram(ctx, tx, r, edges, usable, hs); err != nil {
		return nil, err
	}
	hours.SetInflow(out, hs)
	return out, nil
}

// queueStatsScan aggregates the messages matching f but its statuses:
// the queues and counts are those of the statuses of f, the inflow every
// status's.
func queueStatsScan(ctx context.Context, tx pgx.Tx, f *quarantine.Filter, now time.Time) ([]quarantine.QueueStats, error) {
	anyStatus := *f
	anyStatus.Status = nil
	w := filterWhere(&anyStatus)
	end := hours.WindowEnd(now)
	t5, t1, t24, tn := w.arg(end.Add(-hours.InflowWindows[0])), w.arg(end.Add(-hours.InflowWindows[1])), w.arg(end.Add(-hours.InflowWindows[2])), w.arg(end)
	in := func(since string) string {
		return `count(*) FILTER (WHERE m.collected_at > ` + since + ` AND m.collected_at <= ` + tn + `)`
	}
	oldest := `min(to_char(m.failed_at AT TIME ZONE 'UTC', 'YYYYMMDDHH24MISSUS') || m.id COLLATE "C") FILTER (WHERE m.status = 'quarantined')`
	rows, err := tx.Query(ctx, `SELECT m.queue, m.status, count(*),
		min(m.failed_at) FILTER (WHERE m.status = 'quarantined'), substr(`+oldest+`, 21),
		`+in(t5)+`, `+in(t1)+`, `+in(t24)+`
		FROM messages m`+w.sql()+` GROUP BY m.queue, m.status ORDER BY m.queue, m.status`, w.args...)
	if err != nil {
		return nil, err
	}
	scan := queuestats.NewScan(f.Status)
	var r queuestats.Row
	_, err = pgx.ForEachRow(rows, []any{&r.Queue, &r.Status, &r.Count, &r.OldestAt, &r.OldestID, &r.In5m, &r.In1h, &r.In24h}, func() error {
		scan.Add(r)
		return nil
	})
	return scan.Stats(), err
}

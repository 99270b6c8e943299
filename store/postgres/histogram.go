package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/hours"
)

// Histogram counts, per queue, the messages of r.Kind in each bucket (see
// store.Store), in one read-only snapshot.
//
// The inflow reads the hourly counts of inflow_hours (kept by InsertBatch)
// for the whole hours of each bucket, in one range scan of its primary
// key per queue, the per-minute counts of inflow_minutes for the whole
// minutes of the rest (the parts of a bucket before its first and after
// its last whole hour) within the last day, and counts what is left
// (parts under a minute, or older than the kept minutes) from
// messages_inflow_idx (queue, collected_at) INCLUDE (owner), index-only:
// buckets on whole minutes of the last day read counts alone, whatever
// the inflow. See store/internal/hours.
//
// The waiting ones read the quarantined counts per minute of failed_at
// (waiting_minutes, kept by InsertBatch and a trigger on status changes)
// for the whole minutes of each bucket, and count the parts under a
// minute at its ends from messages_queue_status_idx (queue, status,
// failed_at, id): buckets on whole minutes read counts alone, however
// many wait.
//
// Errors: EINVALID naming the field, EUNAVAILABLE, EINTERNAL.
func (s *Store) Histogram(ctx context.Context, r quarantine.HistogramRequest) ([]quarantine.QueueHistogram, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	edges := make([]time.Time, len(r.Edges))
	for i, e := range r.Edges {
		edges[i] = e.UTC().Truncate(time.Microsecond)
	}
	out := make([]quarantine.QueueHistogram, len(r.Queues))
	for i, q := range r.Queues {
		out[i] = quarantine.QueueHistogram{Queue: q, Counts: make([]int64, len(edges)-1)}
	}
	err := s.snapshot(ctx, "count a histogram", func(tx pgx.Tx) error {
		if r.Kind == quarantine.HistogramInflow {
			return inflowHistogram(ctx, tx, r, edges, hours.Usable(s.clock()), out)
		}
		return waitingHistogram(ctx, tx, r, edges, out)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ownerCond is " AND <m.owner in owners>" on w, or "" without owners.
func ownerCond(w *where, col string, owners []string) string {
	n := len(w.conds)
	w.in(col, owners)
	if len(w.conds) > n {
		return " AND " + w.conds[n]
	}
	return ""
}

// inflowHistogram adds the inflow of r's queues to out: the kept hours,
// the kept minutes (from usable on: hours.Usable), then the parts counted
// from messages.
func inflowHistogram(ctx context.Context, tx pgx.Tx, r quarantine.HistogramRequest, edges []time.Time, usable time.Time, out []quarantine.QueueHistogram) error {
	plan := hours.Of(edges, usable)
	if from, to, ok := plan.Span(); ok {
		w := &where{}
		qs, lo, hi := w.arg(r.Queues), w.arg(from), w.arg(to)
		owner := ownerCond(w, "h.owner", r.Owners)
		rows, err := tx.Query(ctx, `SELECT q.i, h.hour, sum(h.n)::bigint
			FROM unnest(`+qs+`::text[]) WITH ORDINALITY AS q(queue, i)
			JOIN inflow_hours h ON h.queue = q.queue AND h.hour >= `+lo+` AND h.hour < `+hi+owner+`
			GROUP BY 1, 2`, w.args...)
		if err != nil {
			return err
		}
		var qi, n int64
		var hour time.Time
		_, err = pgx.ForEachRow(rows, []any{&qi, &hour, &n}, func() error {
			if b := plan.Bucket(hour.UTC()); b >= 0 {
				out[qi-1].Counts[b] += n
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	// Minutes [lo, hi) are the rows lo <= minute < hi; a counted part
	// (lo, hi] the messages lo < collected_at <= hi.
	return sumMinutes(ctx, tx, r, plan, "inflow_minutes", "m.collected_at > c.lo AND m.collected_at <= c.hi", out)
}

// sumMinutes adds to out, for each queue of r, plan's whole minutes
// summed from table (inflow_minutes or waiting_minutes: the rows lo <=
// minute < hi), and its counted parts counted from the messages that
// match counted (a condition on m and the part (c.lo, c.hi]).
func sumMinutes(ctx context.Context, tx pgx.Tx, r quarantine.HistogramRequest, plan hours.Plan, table, counted string, out []quarantine.QueueHistogram) error {
	if err := sumParts(ctx, tx, r, plan.Minutes, func(owner string) string {
		return `SELECT coalesce(sum(h.n), 0)::bigint FROM ` + table + ` h
			WHERE h.queue = q.queue AND h.minute >= c.lo AND h.minute < c.hi` + owner
	}, "h.owner", out); err != nil {
		return err
	}
	return sumParts(ctx, tx, r, plan.Counted, func(owner string) string {
		return `SELECT count(*) FROM messages m WHERE m.queue = q.queue AND ` + counted + owner
	}, "m.owner", out)
}

// sumParts adds to out, for each queue of r and each part of parts, the
// number that sum (a scalar subquery over q.queue, c.lo and c.hi, with
// the owner condition on ownerCol appended) gives.
func sumParts(ctx context.Context, tx pgx.Tx, r quarantine.HistogramRequest, parts []hours.Range, sum func(owner string) string, ownerCol string, out []quarantine.QueueHistogram) error {
	if len(parts) == 0 {
		return nil
	}
	los, his := make([]time.Time, len(parts)), make([]time.Time, len(parts))
	for j, c := range parts {
		los[j], his[j] = c.Lo, c.Hi
	}
	w := &where{}
	qs, lo, hi := w.arg(r.Queues), w.arg(los), w.arg(his)
	owner := ownerCond(w, ownerCol, r.Owners)
	rows, err := tx.Query(ctx, `SELECT q.i, c.j, (`+sum(owner)+`)
		FROM unnest(`+qs+`::text[]) WITH ORDINALITY AS q(queue, i)
		CROSS JOIN unnest(`+lo+`::timestamptz[], `+hi+`::timestamptz[]) WITH ORDINALITY AS c(lo, hi, j)`, w.args...)
	if err != nil {
		return err
	}
	var qi, j, n int64
	_, err = pgx.ForEachRow(rows, []any{&qi, &j, &n}, func() error {
		out[qi-1].Counts[parts[j-1].Bucket] += n
		return nil
	})
	return err
}

// waitingHistogram adds the quarantined messages of r's queues to out, by
// failed_at: the whole minutes of each bucket from waiting_minutes, the
// parts under a minute at its ends counted from
// messages_queue_status_idx (queue, status, failed_at, id).
func waitingHistogram(ctx context.Context, tx pgx.Tx, r quarantine.HistogramRequest, edges []time.Time, out []quarantine.QueueHistogram) error {
	return sumMinutes(ctx, tx, r, hours.OfMinutes(edges), "waiting_minutes",
		"m.status = 'quarantined' AND m.failed_at > c.lo AND m.failed_at <= c.hi", out)
}

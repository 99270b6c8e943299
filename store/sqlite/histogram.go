package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/hours"
)

// Histogram counts, per queue and bucket, the messages of r.Kind (see
// store.Store), in one read transaction. The inflow reads the whole hours
// of each bucket from inflow_hours (kept by InsertBatch), one range of its
// primary key per queue, the whole minutes of the rest (a bucket's parts
// before its first and after its last whole hour) within the last day
// from inflow_minutes, and counts what is left (parts under a minute, or
// older than the kept minutes) from messages_inflow (queue,
// collected_at); see store/internal/hours. The
// waiting ones read the whole minutes of each bucket from
// waiting_minutes (quarantined messages by the minute of failed_at, kept
// by InsertBatch and triggers on status changes) and count the parts
// under a minute at its ends from messages_queue_status (queue, status,
// failed_at, id). Errors:
// EINVALID naming the field, EUNAVAILABLE.
func (s *Store) Histogram(ctx context.Context, r quarantine.HistogramRequest) ([]quarantine.QueueHistogram, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	out := make([]quarantine.QueueHistogram, len(r.Queues))
	for i, q := range r.Queues {
		out[i] = quarantine.QueueHistogram{Queue: q, Counts: make([]int64, len(r.Edges)-1)}
	}
	var owners []any
	owner := ""
	if len(r.Owners) > 0 {
		owner = ` AND owner IN (SELECT value FROM json_each(?))`
		owners = []any{jsonArray(r.Owners)}
	}
	err := s.read(ctx, "count a histogram", func(tx *sql.Tx) error {
		if r.Kind == quarantine.HistogramInflow {
			return inflowHistogram(ctx, tx, r, owner, owners, hours.Usable(s.clock()), out)
		}
		plan := hours.OfMinutes(r.Edges)
		if err := sumParts(ctx, tx, r.Queues, plan.Minutes, `SELECT coalesce(sum(n), 0) FROM waiting_minutes
			WHERE queue = ? AND minute >= ? AND minute < ?`+owner, owners, out); err != nil {
			return err
		}
		return sumParts(ctx, tx, r.Queues, plan.Counted, `SELECT count(*) FROM messages m INDEXED BY messages_queue_status
			WHERE m.queue = ? AND m.status = 'quarantined' AND m.failed_at > ? AND m.failed_at <= ?`+owner, owners, out)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// inflowHistogram adds the inflow of r's queues to out: the kept hours,
// then the parts counted from messages.
func inflowHistogram(ctx context.Context, tx *sql.Tx, r quarantine.HistogramRequest, owner string, owners []any, usable time.Time, out []quarantine.QueueHistogram) error {
	plan := hours.Of(r.Edges, usable)
	if from, to, ok := plan.Span(); ok {
		stmt, err := tx.PrepareContext(ctx, `SELECT hour, sum(n) FROM inflow_hours
			WHERE queue = ? AND hour >= ? AND hour < ?`+owner+` GROUP BY hour`)
		if err != nil {
			return err
		}
		defer stmt.Close()
		for i, queue := range r.Queues {
			rows, err := stmt.QueryContext(ctx, append([]any{queue, micros(from), micros(to)}, owners...)...)
			if err != nil {
				return err
			}
			for rows.Next() {
				var hour, n int64
				if err := rows.Scan(&hour, &n); err != nil {
					rows.Close()
					return err
				}
				if b := plan.Bucket(fromMicros(hour)); b >= 0 {
					out[i].Counts[b] += n
				}
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
		}
	}
	// Minutes [lo, hi) are the rows lo <= minute < hi; a counted part
	// (lo, hi] the messages lo < collected_at <= hi.
	if err := sumParts(ctx, tx, r.Queues, plan.Minutes, `SELECT coalesce(sum(n), 0) FROM inflow_minutes
		WHERE queue = ? AND minute >= ? AND minute < ?`+owner, owners, out); err != nil {
		return err
	}
	return sumParts(ctx, tx, r.Queues, plan.Counted, `SELECT count(*) FROM messages m INDEXED BY messages_inflow
		WHERE m.queue = ? AND m.collected_at > ? AND m.collected_at <= ?`+owner, owners, out)
}

// sumParts adds to out, for each of queues and each part of parts, the
// number q gives for (queue, lo, hi, owners...).
func sumParts(ctx context.Context, tx *sql.Tx, queues []string, parts []hours.Range, q string, owners []any, out []quarantine.QueueHistogram) error {
	if len(parts) == 0 {
		return nil
	}
	stmt, err := tx.PrepareContext(ctx, q)
	if err != nil {
		return err
	}
	defer stmt.Close()
	for i, queue := range queues {
		for _, c := range parts {
			var n int64
			if err := stmt.QueryRowContext(ctx, append([]any{queue, micros(c.Lo), micros(c.Hi)}, owners...)...).Scan(&n); err != nil {
				return err
			}
			out[i].Counts[c.Bucket] += n
		}
	}
	return nil
}

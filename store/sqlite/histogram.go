package sqlite

import (
	"context"
	"database/sql"

	"github.com/quarantine-dev/quarantine"
)

// Histogram counts, per queue and bucket, the messages of r.Kind (see
// store.Store): one count per (queue, bucket) pair, each a range scan of
// messages_inflow (queue, collected_at) for the inflow, or of
// messages_queue_status (queue, status, failed_at, id) for the waiting
// ones, in one read transaction. Errors: EINVALID naming the field,
// EUNAVAILABLE.
func (s *Store) Histogram(ctx context.Context, r quarantine.HistogramRequest) ([]quarantine.QueueHistogram, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	q := `SELECT count(*) FROM messages m INDEXED BY messages_inflow
		WHERE m.queue = ? AND m.collected_at > ? AND m.collected_at <= ?`
	if r.Kind == quarantine.HistogramWaiting {
		q = `SELECT count(*) FROM messages m INDEXED BY messages_queue_status
		WHERE m.queue = ? AND m.status = 'quarantined' AND m.failed_at > ? AND m.failed_at <= ?`
	}
	var owners []any
	if len(r.Owners) > 0 {
		q += ` AND m.owner IN (SELECT value FROM json_each(?))`
		owners = []any{jsonArray(r.Owners)}
	}
	out := make([]quarantine.QueueHistogram, len(r.Queues))
	err := s.read(ctx, "count a histogram", func(tx *sql.Tx) error {
		stmt, err := tx.PrepareContext(ctx, q)
		if err != nil {
			return err
		}
		defer stmt.Close()
		for i, queue := range r.Queues {
			h := quarantine.QueueHistogram{Queue: queue, Counts: make([]int64, len(r.Edges)-1)}
			for b := range h.Counts {
				args := append([]any{queue, micros(r.Edges[b]), micros(r.Edges[b+1])}, owners...)
				if err := stmt.QueryRowContext(ctx, args...).Scan(&h.Counts[b]); err != nil {
					return err
				}
			}
			out[i] = h
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

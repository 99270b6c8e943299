package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quarantine-dev/quarantine"
)

// Histogram counts, per queue and bucket, the messages of r.Kind (see
// store.Store): one count per (queue, bucket) pair, each an index range
// scan, of messages_inflow_idx (queue, collected_at) INCLUDE (owner) for
// the inflow (index-only, owners included) and of the partial
// messages_oldest_idx (queue, failed_at, id) WHERE status = 'quarantined'
// for the waiting ones. Errors: EINVALID naming the field, EUNAVAILABLE,
// EINTERNAL.
func (s *Store) Histogram(ctx context.Context, r quarantine.HistogramRequest) ([]quarantine.QueueHistogram, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	col, cond := "m.collected_at", ""
	if r.Kind == quarantine.HistogramWaiting {
		col, cond = "m.failed_at", " AND m.status = 'quarantined'"
	}
	w := &where{}
	qs := w.arg(r.Queues)
	lo, hi := make([]time.Time, len(r.Edges)-1), make([]time.Time, len(r.Edges)-1)
	for i := range lo {
		lo[i], hi[i] = r.Edges[i].UTC().Truncate(time.Microsecond), r.Edges[i+1].UTC().Truncate(time.Microsecond)
	}
	los, his := w.arg(lo), w.arg(hi)
	w.in("m.owner", r.Owners)
	owner := ""
	if len(w.conds) > 0 {
		owner = " AND " + w.conds[0]
	}
	out := make([]quarantine.QueueHistogram, len(r.Queues))
	for i, q := range r.Queues {
		out[i] = quarantine.QueueHistogram{Queue: q, Counts: make([]int64, len(lo))}
	}
	opts := pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}
	err := s.inTxOpts(ctx, opts, "count a histogram", func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT q.i, b.i, (SELECT count(*) FROM messages m
				WHERE m.queue = q.queue`+cond+` AND `+col+` > b.lo AND `+col+` <= b.hi`+owner+`)
			FROM unnest(`+qs+`::text[]) WITH ORDINALITY AS q(queue, i),
				unnest(`+los+`::timestamptz[], `+his+`::timestamptz[]) WITH ORDINALITY AS b(lo, hi, i)`, w.args...)
		if err != nil {
			return err
		}
		var qi, bi, n int64
		_, err = pgx.ForEachRow(rows, []any{&qi, &bi, &n}, func() error {
			out[qi-1].Counts[bi-1] = n
			return nil
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

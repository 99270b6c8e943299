package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quarantine-dev/quarantine"
)

// Histogram counts, per queue, the messages of r.Kind in each bucket (see
// store.Store): one index range scan per queue over the whole span of the
// edges, of messages_inflow_idx (queue, collected_at) INCLUDE (owner) for
// the inflow (index-only, owners included) and of messages_queue_status_idx
// (queue, status, failed_at, id) for the waiting ones, grouped by bucket.
// width_bucket finds a time's bucket among the edges, lower bounds
// included; stored times are whole microseconds, so that t in (lo, hi]
// is t-1µs in [lo, hi). Errors: EINVALID naming the field, EUNAVAILABLE,
// EINTERNAL.
func (s *Store) Histogram(ctx context.Context, r quarantine.HistogramRequest) ([]quarantine.QueueHistogram, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	col, cond := "m.collected_at", ""
	if r.Kind == quarantine.HistogramWaiting {
		col, cond = "m.failed_at", " AND m.status = 'quarantined'"
	}
	edges := make([]time.Time, len(r.Edges))
	for i, e := range r.Edges {
		edges[i] = e.UTC().Truncate(time.Microsecond)
	}
	w := &where{}
	qs, es := w.arg(r.Queues), w.arg(edges)
	lo, hi := w.arg(edges[0]), w.arg(edges[len(edges)-1])
	w.in("m.owner", r.Owners)
	owner := ""
	if len(w.conds) > 0 {
		owner = " AND " + w.conds[0]
	}
	out := make([]quarantine.QueueHistogram, len(r.Queues))
	for i, q := range r.Queues {
		out[i] = quarantine.QueueHistogram{Queue: q, Counts: make([]int64, len(edges)-1)}
	}
	opts := pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}
	err := s.inTxOpts(ctx, opts, "count a histogram", func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT q.i, c.b, c.n
			FROM unnest(`+qs+`::text[]) WITH ORDINALITY AS q(queue, i)
			CROSS JOIN LATERAL (
				SELECT width_bucket(`+col+` - interval '1 microsecond', `+es+`::timestamptz[]) AS b, count(*) AS n
				FROM messages m
				WHERE m.queue = q.queue`+cond+` AND `+col+` > `+lo+` AND `+col+` <= `+hi+owner+`
				GROUP BY 1) c`, w.args...)
		if err != nil {
			return err
		}
		var qi, bi, n int64
		_, err = pgx.ForEachRow(rows, []any{&qi, &bi, &n}, func() error {
			if bi < 1 || int(bi) > len(edges)-1 {
				return quarantine.Errorf(quarantine.EINTERNAL, "histogram: bucket %d outside the edges", bi)
			}
			out[qi-1].Counts[bi-1] += n
			return nil
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

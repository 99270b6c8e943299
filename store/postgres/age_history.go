package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quarantine-dev/quarantine"
)

// sampleAges takes the minute of $1 (its run row), then one sample per
// queue and owner with quarantined messages, from the kept counts of
// failure_groups: the oldest is the least first_failed_at of the queue's
// quarantined buckets, which the writers keep exact. A minute already
// taken inserts no run row, hence no sample.
const sampleAges = `WITH run AS (
	INSERT INTO age_sample_runs (minute, sampled_at) VALUES ($1, $2)
	ON CONFLICT (minute) DO NOTHING
	RETURNING sampled_at
), ins AS (
	INSERT INTO age_samples (sampled_at, queue, owner, oldest_failed_at, waiting)
	SELECT run.sampled_at, g.queue, g.owner, min(g.first_failed_at), sum(g.n)
	FROM run CROSS JOIN failure_groups g
	WHERE g.status = 'quarantined' AND g.n > 0 AND g.first_failed_at IS NOT NULL
	GROUP BY 1, 2, 3
	RETURNING 1
)
SELECT (SELECT count(*) FROM run), (SELECT count(*) FROM ins)`

// SampleAges records the age of each queue's oldest quarantined message
// at now, once a minute; see store.Store. Errors: EUNAVAILABLE, EINTERNAL.
func (s *Store) SampleAges(ctx context.Context, now time.Time) (quarantine.AgeSampleResult, error) {
	now = now.UTC().Truncate(time.Microsecond)
	var runs, n int64
	if err := s.pool.QueryRow(ctx, sampleAges, now.Truncate(time.Minute), now).Scan(&runs, &n); err != nil {
		return quarantine.AgeSampleResult{}, translate(err, "sample the ages")
	}
	return quarantine.AgeSampleResult{Taken: runs == 1, Queues: int(n)}, nil
}

// AgeHistory reads the samples within r.Edges, in one snapshot: a range
// of age_sample_runs' key (minute) for the sample counts and a range of
// age_samples' (sampled_at, queue, owner) INCLUDE (oldest_failed_at,
// waiting), index-only, summed per queue and sample (its owners), then
// the largest per queue and bucket. width_bucket finds a time's bucket,
// lower bounds included: t in (lo, hi] is t-1µs in [lo, hi). Errors:
// EINVALID naming the field, EUNAVAILABLE, EINTERNAL.
func (s *Store) AgeHistory(ctx context.Context, r quarantine.AgeHistoryRequest) (quarantine.AgeHistory, error) {
	if err := r.Validate(); err != nil {
		return quarantine.AgeHistory{}, err
	}
	edges := make([]time.Time, len(r.Edges))
	for i, e := range r.Edges {
		edges[i] = e.UTC().Truncate(time.Microsecond)
	}
	nb := len(edges) - 1
	out := quarantine.AgeHistory{Samples: make([]int64, nb), Queues: []quarantine.QueueAgeHistory{}}
	opts := pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}
	err := s.inTxOpts(ctx, opts, "read the age history", func(tx pgx.Tx) error {
		lo, hi := edges[0], edges[nb]
		rows, err := tx.Query(ctx, `SELECT width_bucket(sampled_at - interval '1 microsecond', $1::timestamptz[]), count(*)
			FROM age_sample_runs
			WHERE minute > $2::timestamptz - interval '1 minute' AND minute <= $3 AND sampled_at > $2 AND sampled_at <= $3
			GROUP BY 1`, edges, lo, hi)
		if err != nil {
			return err
		}
		var b, n int64
		_, err = pgx.ForEachRow(rows, []any{&b, &n}, func() error {
			if b < 1 || int(b) > nb {
				return quarantine.Errorf(quarantine.EINTERNAL, "age history: bucket %d outside the edges", b)
			}
			out.Samples[b-1] = n
			return nil
		})
		if err != nil {
			return err
		}
		w := &where{}
		es, l, h := w.arg(edges), w.arg(lo), w.arg(hi)
		owner := ownerCond(w, "s.owner", r.Owners)
		rows, err = tx.Query(ctx, `SELECT x.queue, width_bucket(x.sampled_at - interval '1 microsecond', `+es+`::timestamptz[]),
				max(x.age_us), max(x.waiting)::bigint
			FROM (SELECT s.queue, s.sampled_at,
					greatest(0, (extract(epoch FROM max(s.sampled_at - s.oldest_failed_at)) * 1000000)::bigint) AS age_us,
					sum(s.waiting) AS waiting
				FROM age_samples s
				WHERE s.sampled_at > `+l+` AND s.sampled_at <= `+h+owner+`
				GROUP BY 1, 2) x
			GROUP BY 1, 2 ORDER BY 1, 2`, w.args...)
		if err != nil {
			return err
		}
		var queue string
		var age, waiting int64
		_, err = pgx.ForEachRow(rows, []any{&queue, &b, &age, &waiting}, func() error {
			if b < 1 || int(b) > nb {
				return quarantine.Errorf(quarantine.EINTERNAL, "age history: bucket %d outside the edges", b)
			}
			if len(out.Queues) == 0 || out.Queues[len(out.Queues)-1].Queue != queue {
				out.Queues = append(out.Queues, quarantine.QueueAgeHistory{Queue: queue,
					Oldest: make([]time.Duration, nb), Waiting: make([]int64, nb)})
			}
			q := &out.Queues[len(out.Queues)-1]
			q.Oldest[b-1], q.Waiting[b-1] = time.Duration(age)*time.Microsecond, waiting
			return nil
		})
		return err
	})
	if err != nil {
		return quarantine.AgeHistory{}, err
	}
	return out, nil
}

// PruneAgeSamples deletes the samples taken before before, and their run
// rows, in one transaction; see store.Store. Errors: EUNAVAILABLE,
// EINTERNAL.
func (s *Store) PruneAgeSamples(ctx context.Context, before time.Time) (int64, error) {
	before = before.UTC().Truncate(time.Microsecond)
	var n int64
	err := s.inTx(ctx, "prune the age samples", func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM age_samples WHERE sampled_at < $1`, before); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM age_sample_runs WHERE minute <= $1 AND sampled_at < $1`, before)
		n = tag.RowsAffected()
		return err
	})
	return n, err
}

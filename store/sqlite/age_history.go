package sqlite

import (
	"context"
	"database/sql"
	"sort"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// SampleAges records the age of each queue's oldest quarantined message
// at now, once a minute; see store.Store. The minute's run row is taken
// first (a minute already taken writes nothing), then one sample per
// queue and owner from the kept counts of failure_groups: the oldest is
// the least first_failed_at of the queue's quarantined buckets, which the
// writers keep exact. Errors: EUNAVAILABLE, EINTERNAL.
func (s *Store) SampleAges(ctx context.Context, now time.Time) (quarantine.AgeSampleResult, error) {
	at := micros(now)
	minute := micros(now.UTC().Truncate(time.Minute))
	var res quarantine.AgeSampleResult
	err := s.write(ctx, "sample the ages", func(tx *sql.Tx) error {
		res = quarantine.AgeSampleResult{}
		r, err := tx.ExecContext(ctx, `INSERT INTO age_sample_runs (minute, sampled_at) VALUES (?, ?)
			ON CONFLICT (minute) DO NOTHING`, minute, at)
		if err != nil {
			return err
		}
		if n, err := r.RowsAffected(); err != nil || n == 0 {
			return err
		}
		res.Taken = true
		r, err = tx.ExecContext(ctx, `INSERT INTO age_samples (sampled_at, queue, owner, oldest_failed_at, waiting)
			SELECT ?, queue, owner, min(first_failed_at), sum(n) FROM failure_groups
			WHERE status = 'quarantined' AND n > 0 AND first_failed_at IS NOT NULL
			GROUP BY queue, owner`, at)
		if err != nil {
			return err
		}
		n, err := r.RowsAffected()
		res.Queues = int(n)
		return err
	})
	if err != nil {
		return quarantine.AgeSampleResult{}, err
	}
	return res, nil
}

// AgeHistory reads the samples within r.Edges in one read transaction: a
// range of age_sample_runs' key for the sample counts, and a range of
// age_samples' key (sampled_at, queue, owner), summed per queue and
// sample (its owners), the largest kept per queue and bucket. Errors:
// EINVALID naming the field, EUNAVAILABLE.
func (s *Store) AgeHistory(ctx context.Context, r quarantine.AgeHistoryRequest) (quarantine.AgeHistory, error) {
	if err := r.Validate(); err != nil {
		return quarantine.AgeHistory{}, err
	}
	nb := len(r.Edges) - 1
	edges := make([]int64, len(r.Edges))
	for i, e := range r.Edges {
		edges[i] = micros(e)
	}
	// bucket is the bucket of t in (edges[b], edges[b+1]], or -1.
	bucket := func(t int64) int {
		i := sort.Search(len(edges), func(i int) bool { return edges[i] >= t })
		if i == 0 || i == len(edges) {
			return -1
		}
		return i - 1
	}
	lo, hi := edges[0], edges[nb]
	out := quarantine.AgeHistory{Samples: make([]int64, nb), Queues: []quarantine.QueueAgeHistory{}}
	var owners []any
	owner := ""
	if len(r.Owners) > 0 {
		owner = ` AND owner IN (SELECT value FROM json_each(?))`
		owners = []any{jsonArray(r.Owners)}
	}
	err := s.read(ctx, "read the age history", func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT sampled_at FROM age_sample_runs
			WHERE minute > ? AND minute <= ? AND sampled_at > ? AND sampled_at <= ?`,
			lo-int64(time.Minute/time.Microsecond), hi, lo, hi)
		if err != nil {
			return err
		}
		for rows.Next() {
			var at int64
			if err := rows.Scan(&at); err != nil {
				rows.Close()
				return err
			}
			if b := bucket(at); b >= 0 {
				out.Samples[b]++
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		rows, err = tx.QueryContext(ctx, `SELECT queue, sampled_at, max(sampled_at - oldest_failed_at), sum(waiting)
			FROM age_samples WHERE sampled_at > ? AND sampled_at <= ?`+owner+`
			GROUP BY queue, sampled_at ORDER BY queue, sampled_at`, append([]any{lo, hi}, owners...)...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var queue string
			var at, age, waiting int64
			if err := rows.Scan(&queue, &at, &age, &waiting); err != nil {
				return err
			}
			b := bucket(at)
			if b < 0 {
				continue
			}
			if len(out.Queues) == 0 || out.Queues[len(out.Queues)-1].Queue != queue {
				out.Queues = append(out.Queues, quarantine.QueueAgeHistory{Queue: queue,
					Oldest: make([]time.Duration, nb), Waiting: make([]int64, nb)})
			}
			q := &out.Queues[len(out.Queues)-1]
			q.Oldest[b] = max(q.Oldest[b], time.Duration(max(age, 0))*time.Microsecond)
			q.Waiting[b] = max(q.Waiting[b], waiting)
		}
		return rows.Err()
	})
	if err != nil {
		return quarantine.AgeHistory{}, err
	}
	return out, nil
}

// PruneAgeSamples deletes the samples taken before before, and their run
// rows, in one transaction; see store.Store. Errors: EUNAVAILABLE.
func (s *Store) PruneAgeSamples(ctx context.Context, before time.Time) (int64, error) {
	b := micros(before)
	var n int64
	err := s.write(ctx, "prune the age samples", func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM age_samples WHERE sampled_at < ?`, b); err != nil {
			return err
		}
		r, err := tx.ExecContext(ctx, `DELETE FROM age_sample_runs WHERE minute <= ? AND sampled_at < ?`, b, b)
		if err != nil {
			return err
		}
		n, err = r.RowsAffected()
		return err
	})
	return n, err
}

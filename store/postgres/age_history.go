package postgres

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/hours"
)

// sampleAges takes the minute $1 (its run row), counts the sample in its
// step $3, then folds the ages and waiting counts at $2 of each queue and
// owner with quarantined messages, and of each queue over its owners,
// into the step's rows (key order), from the kept counts of
// failure_groups: the oldest is the least first_failed_at of the queue's
// quarantined buckets, which the writers keep exact. A minute already
// taken inserts no run row, hence nothing else.
const sampleAges = `WITH run AS (
	INSERT INTO age_sample_runs (minute, sampled_at) VALUES ($1, $2)
	ON CONFLICT (minute) DO NOTHING
	RETURNING sampled_at
), step AS (
	INSERT INTO age_steps AS s (step, samples) SELECT $3, 1 FROM run
	ON CONFLICT (step) DO UPDATE SET samples = s.samples + 1
	RETURNING 1
), src AS (
	SELECT g.queue, g.owner, min(g.first_failed_at) AS oldest, sum(g.n)::bigint AS waiting
	FROM run CROSS JOIN failure_groups g
	WHERE g.status = 'quarantined' AND g.n > 0 AND g.first_failed_at IS NOT NULL
	GROUP BY 1, 2
), folded AS (
	SELECT false AS all_owners, queue, owner, oldest, waiting FROM src
	UNION ALL
	SELECT true, queue, '', min(oldest), sum(waiting)::bigint FROM src GROUP BY queue
), ins AS (
	INSERT INTO age_step_queues AS a (step, all_owners, queue, owner, age_us, waiting)
	SELECT $3, f.all_owners, f.queue, f.owner,
		greatest(0, (extract(epoch FROM $2::timestamptz - f.oldest) * 1000000)::bigint), f.waiting
	FROM folded f ORDER BY 2, 3, 4
	ON CONFLICT (step, all_owners, queue, owner) DO UPDATE SET
		age_us = greatest(a.age_us, EXCLUDED.age_us), waiting = greatest(a.waiting, EXCLUDED.waiting)
	RETURNING a.all_owners
)
SELECT (SELECT count(*) FROM run), (SELECT count(*) FROM step), (SELECT count(*) FROM ins WHERE NOT all_owners)`

// SampleAges records the age of each queue's oldest quarantined message
// at now, once a minute, in one statement; see store.Store. Errors:
// EUNAVAILABLE, EINTERNAL.
func (s *Store) SampleAges(ctx context.Context, now time.Time) (quarantine.AgeSampleResult, error) {
	now = now.UTC().Truncate(time.Microsecond)
	var runs, steps, n int64
	err := s.pool.QueryRow(ctx, sampleAges, now.Truncate(time.Minute), now, now.Truncate(quarantine.AgeHistoryStep)).Scan(&runs, &steps, &n)
	if err != nil {
		return quarantine.AgeSampleResult{}, translate(err, "sample the ages")
	}
	return quarantine.AgeSampleResult{Taken: runs == 1, Queues: int(n)}, nil
}

// AgeHistory reads the steps of r in one snapshot: a range of age_steps'
// key, and a range of age_step_queues' (step, all_owners, queue, owner)
// INCLUDE (age_us, waiting), index-only and in its order (no sort): one
// row per queue and step without owners, or per queue, owner and step of
// r.Owners (folded here: the largest age, the waiting counts summed).
// Errors: EINVALID naming the field, EUNAVAILABLE, EINTERNAL.
func (s *Store) AgeHistory(ctx context.Context, r quarantine.AgeHistoryRequest) (quarantine.AgeHistory, error) {
	if err := r.Validate(); err != nil {
		return quarantine.AgeHistory{}, err
	}
	steps := r.Steps()
	from, to := steps[0], steps[len(steps)-1]
	index := func(t time.Time) int { return int(t.UTC().Sub(from) / quarantine.AgeHistoryStep) }
	out := quarantine.AgeHistory{Steps: steps, Samples: make([]int64, len(steps)), Queues: []quarantine.QueueAgeHistory{}}
	err := s.snapshot(ctx, "read the age history", func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT step, samples FROM age_steps WHERE step >= $1 AND step <= $2`, from, to)
		if err != nil {
			return err
		}
		var step time.Time
		var n int64
		_, err = pgx.ForEachRow(rows, []any{&step, &n}, func() error {
			out.Samples[index(step)] = n
			return nil
		})
		if err != nil {
			return err
		}
		w := &where{}
		lo, hi := w.arg(from), w.arg(to)
		cond := " AND a.all_owners"
		if len(r.Owners) > 0 {
			cond = " AND NOT a.all_owners" + ownerCond(w, "a.owner", r.Owners)
		}
		rows, err = tx.Query(ctx, `SELECT a.queue, a.step, a.age_us, a.waiting FROM age_step_queues a
			WHERE a.step >= `+lo+` AND a.step <= `+hi+cond+` ORDER BY a.step, a.queue`, w.args...)
		if err != nil {
			return err
		}
		var queue string
		var age, waiting int64
		byQueue := map[string]int{}
		_, err = pgx.ForEachRow(rows, []any{&queue, &step, &age, &waiting}, func() error {
			qi, ok := byQueue[queue]
			if !ok {
				qi = len(out.Queues)
				byQueue[queue] = qi
				out.Queues = append(out.Queues, quarantine.QueueAgeHistory{Queue: queue,
					Oldest: make([]time.Duration, len(steps)), Waiting: make([]int64, len(steps))})
			}
			q, i := &out.Queues[qi], index(step)
			q.Oldest[i] = max(q.Oldest[i], time.Duration(age)*time.Microsecond)
			q.Waiting[i] += waiting
			return nil
		})
		slices.SortFunc(out.Queues, func(a, b quarantine.QueueAgeHistory) int { return strings.Compare(a.Queue, b.Queue) })
		return err
	})
	if err != nil {
		return quarantine.AgeHistory{}, err
	}
	return out, nil
}

// PruneAgeSamples deletes the steps before the one holding before, and
// the sampled minutes before before, in one transaction; see
// store.Store. It deletes too the per-minute inflow counts older than
// hours.MinutesKept before the store's clock and the empty minutes of
// waiting_minutes (the age sampler's hourly prune is their background
// loop). Errors: EUNAVAILABLE, EINTERNAL.
func (s *Store) PruneAgeSamples(ctx context.Context, before time.Time) (int64, error) {
	before = before.UTC().Truncate(time.Microsecond)
	step := before.Truncate(quarantine.AgeHistoryStep)
	var n int64
	err := s.inTx(ctx, "prune the age samples", func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM age_step_queues WHERE step < $1`, step); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM age_steps WHERE step < $1`, step); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM age_sample_runs WHERE minute <= $1 AND sampled_at < $1`, before)
		if err != nil {
			return err
		}
		n = tag.RowsAffected()
		if _, err := tx.Exec(ctx, `DELETE FROM inflow_minutes WHERE minute < $1`, s.clock().Add(-hours.MinutesKept)); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM waiting_minutes WHERE n = 0`)
		return err
	})
	return n, err
}

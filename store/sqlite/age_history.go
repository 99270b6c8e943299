package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/hours"
)

// SampleAges records the age of each queue's oldest quarantined message
// at now, once a minute, in one write transaction; see store.Store. The
// minute's run row is taken first (a minute already taken writes
// nothing), the sample counted in its step, then the ages and waiting
// counts of each queue and owner with quarantined messages, and of each
// queue over its owners, are folded into the step's rows, from the kept
// counts of failure_groups: the oldest is the least first_failed_at of the
// queue's quarantined buckets, which the writers keep exact. Errors:
// EUNAVAILABLE, EINTERNAL.
func (s *Store) SampleAges(ctx context.Context, now time.Time) (quarantine.AgeSampleResult, error) {
	at := micros(now)
	minute := micros(now.UTC().Truncate(time.Minute))
	step := micros(now.UTC().Truncate(quarantine.AgeHistoryStep))
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
		if _, err := tx.ExecContext(ctx, `INSERT INTO age_steps (step, samples) VALUES (?, 1)
			ON CONFLICT (step) DO UPDATE SET samples = samples + 1`, step); err != nil {
			return err
		}
		type sample struct {
			all          int
			queue, owner string
			age, waiting int64
		}
		rows, err := tx.QueryContext(ctx, `SELECT queue, owner, min(first_failed_at), sum(n) FROM failure_groups
			WHERE status = 'quarantined' AND n > 0 AND first_failed_at IS NOT NULL
			GROUP BY queue, owner ORDER BY queue, owner`)
		if err != nil {
			return err
		}
		var samples []sample
		for rows.Next() {
			var sm sample
			var oldest int64
			if err := rows.Scan(&sm.queue, &sm.owner, &oldest, &sm.waiting); err != nil {
				rows.Close()
				return err
			}
			sm.age = max(at-oldest, 0)
			samples = append(samples, sm)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		res.Queues = len(samples)
		// Per queue over its owners: the largest age (its owners' least
		// oldest), the waiting counts summed.
		for i := 0; i < res.Queues; i++ {
			sm := samples[i]
			if n := len(samples); n > res.Queues && samples[n-1].queue == sm.queue {
				samples[n-1].age = max(samples[n-1].age, sm.age)
				samples[n-1].waiting += sm.waiting
				continue
			}
			samples = append(samples, sample{all: 1, queue: sm.queue, age: sm.age, waiting: sm.waiting})
		}
		up, err := tx.PrepareContext(ctx, `INSERT INTO age_step_queues (step, all_owners, queue, owner, age_us, waiting)
			VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (step, all_owners, queue, owner) DO UPDATE SET
				age_us = max(age_us, excluded.age_us), waiting = max(waiting, excluded.waiting)`)
		if err != nil {
			return err
		}
		defer up.Close()
		for _, sm := range samples {
			if _, err := up.ExecContext(ctx, step, sm.all, sm.queue, sm.owner, sm.age, sm.waiting); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return quarantine.AgeSampleResult{}, err
	}
	return res, nil
}

// AgeHistory reads the steps of r in one read transaction: a range of
// age_steps' key and a range of age_step_queues' key (step, all_owners,
// queue, owner): one row per queue and step without owners, or per
// queue, owner and step of r.Owners (folded here: the largest age, the
// waiting counts summed). Errors: EINVALID naming the field,
// EUNAVAILABLE.
func (s *Store) AgeHistory(ctx context.Context, r quarantine.AgeHistoryRequest) (quarantine.AgeHistory, error) {
	if err := r.Validate(); err != nil {
		return quarantine.AgeHistory{}, err
	}
	steps := r.Steps()
	from, to := micros(steps[0]), micros(steps[len(steps)-1])
	stepMicros := int64(quarantine.AgeHistoryStep / time.Microsecond)
	index := func(step int64) int { return int((step - from) / stepMicros) }
	out := quarantine.AgeHistory{Steps: steps, Samples: make([]int64, len(steps)), Queues: []quarantine.QueueAgeHistory{}}
	q := `SELECT queue, step, age_us, waiting FROM age_step_queues WHERE step >= ? AND step <= ? AND all_owners = 1 ORDER BY queue, step`
	args := []any{from, to}
	if len(r.Owners) > 0 {
		q = `SELECT queue, step, age_us, waiting FROM age_step_queues WHERE step >= ? AND step <= ? AND all_owners = 0
			AND owner IN (SELECT value FROM json_each(?)) ORDER BY queue, step`
		args = append(args, jsonArray(r.Owners))
	}
	err := s.read(ctx, "read the age history", func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT step, samples FROM age_steps WHERE step >= ? AND step <= ?`, from, to)
		if err != nil {
			return err
		}
		for rows.Next() {
			var step, n int64
			if err := rows.Scan(&step, &n); err != nil {
				rows.Close()
				return err
			}
			out.Samples[index(step)] = n
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		rows, err = tx.QueryContext(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var queue string
			var step, age, waiting int64
			if err := rows.Scan(&queue, &step, &age, &waiting); err != nil {
				return err
			}
			if len(out.Queues) == 0 || out.Queues[len(out.Queues)-1].Queue != queue {
				out.Queues = append(out.Queues, quarantine.QueueAgeHistory{Queue: queue,
					Oldest: make([]time.Duration, len(steps)), Waiting: make([]int64, len(steps))})
			}
			qh, i := &out.Queues[len(out.Queues)-1], index(step)
			qh.Oldest[i] = max(qh.Oldest[i], time.Duration(age)*time.Microsecond)
			qh.Waiting[i] += waiting
		}
		return rows.Err()
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
// loop). Errors: EUNAVAILABLE.
func (s *Store) PruneAgeSamples(ctx context.Context, before time.Time) (int64, error) {
	b := micros(before)
	step := micros(before.UTC().Truncate(quarantine.AgeHistoryStep))
	var n int64
	err := s.write(ctx, "prune the age samples", func(tx *sql.Tx) error {
		for _, q := range []string{`DELETE FROM age_step_queues WHERE step < ?`, `DELETE FROM age_steps WHERE step < ?`} {
			if _, err := tx.ExecContext(ctx, q, step); err != nil {
				return err
			}
		}
		r, err := tx.ExecContext(ctx, `DELETE FROM age_sample_runs WHERE minute <= ? AND sampled_at < ?`, b, b)
		if err != nil {
			return err
		}
		if n, err = r.RowsAffected(); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM inflow_minutes WHERE minute < ?`, micros(s.clock().Add(-hours.MinutesKept))); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM waiting_minutes WHERE n = 0`)
		return err
	})
	return n, err
}

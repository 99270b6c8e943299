package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/replays"
)

// TakeReplayTokens takes up to want tokens from every bucket at once; see
// store.Replays. The buckets are read and written in key order in the one
// write transaction. Errors: EINVALID for a bucket without key or
// positive rate, EUNAVAILABLE.
func (s *Store) TakeReplayTokens(ctx context.Context, buckets []quarantine.RateBucket, want int) (int, time.Duration, error) {
	bs, err := replays.Buckets(buckets)
	if err != nil {
		return 0, 0, err
	}
	if want <= 0 {
		return 0, 0, nil
	}
	if len(bs) == 0 {
		return want, 0, nil
	}
	var n int
	var wait time.Duration
	err = s.write(ctx, "take replay tokens", func(tx *sql.Tx) (err error) {
		n, wait, err = takeTokens(ctx, tx, bs, want, s.clock())
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	return n, wait, nil
}

// takeTokens takes up to want tokens from every bucket of bs (validated,
// in key order) at now, in tx.
func takeTokens(ctx context.Context, tx *sql.Tx, bs []quarantine.RateBucket, want int, now time.Time) (int, time.Duration, error) {
	tokens := make([]float64, len(bs))
	stamps := make([]time.Time, len(bs))
	for i, b := range bs {
		var t float64
		var at int64
		err := tx.QueryRowContext(ctx, `SELECT tokens, updated_at FROM replay_buckets WHERE key = ?`, b.Key).Scan(&t, &at)
		switch {
		case err == sql.ErrNoRows:
			t, at = replays.Capacity(b), micros(now)
		case err != nil:
			return 0, 0, err
		}
		last := fromMicros(at)
		tokens[i] = replays.Refill(b, t, last, now)
		stamps[i] = now
		if last.After(now) { // another engine's clock is ahead: never refill twice
			stamps[i] = last
		}
	}
	n, wait := replays.Grant(bs, tokens, want)
	if n == 0 {
		// Nothing taken: the stored state refills to the same tokens
		// later, and this transaction stays a read.
		return 0, wait, nil
	}
	for i, b := range bs {
		if _, err := tx.ExecContext(ctx, `INSERT INTO replay_buckets (key, tokens, updated_at) VALUES (?, ?, ?)
			ON CONFLICT (key) DO UPDATE SET tokens = excluded.tokens, updated_at = excluded.updated_at`,
			b.Key, tokens[i]-float64(n), micros(stamps[i])); err != nil {
			return 0, 0, err
		}
	}
	return n, wait, nil
}

// HoldReplayTokens empties bucket key until until; see store.Replays.
// Errors: EINVALID for an empty key, EUNAVAILABLE.
func (s *Store) HoldReplayTokens(ctx context.Context, key string, until time.Time) error {
	if key == "" {
		return quarantine.Errorf(quarantine.EINVALID, "a rate bucket needs a key")
	}
	return s.write(ctx, "hold replay tokens", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO replay_buckets (key, tokens, updated_at) VALUES (?1, 0, ?2)
			ON CONFLICT (key) DO UPDATE SET tokens = min(tokens, 0), updated_at = max(updated_at, ?2)`,
			key, micros(until.UTC().Truncate(time.Microsecond)))
		return err
	})
}

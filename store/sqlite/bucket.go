package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/buckets"
	"github.com/quarantine-dev/quarantine/store/internal/replays"
)

// TakeReplayTokens takes up to want tokens from every bucket at once; see
// store.Replays. The buckets are read and written in key order in the one
// write transaction. Errors: EINVALID for a bucket without key or
// positive rate, EUNAVAILABLE.
func (s *Store) TakeReplayTokens(ctx context.Context, bs []quarantine.RateBucket, want int) (int, time.Duration, error) {
	return buckets.Tokens(ctx, bs, want, s.take)
}

// take is the store's buckets.Take: takeTokens in a write transaction.
func (s *Store) take(ctx context.Context, what string, bs []quarantine.RateBucket, reserve replays.Reserver) (n int, due time.Time, wait time.Duration, err error) {
	err = s.write(ctx, what, func(tx *sql.Tx) (err error) {
		n, due, wait, err = takeTokens(ctx, tx, bs, s.clock(), reserve)
		return err
	})
	return n, due, wait, err
}

// takeTokens grants from every bucket of bs (validated, in key order)
// at now what reserve grants, in tx; it returns how many and when they
// are due (the first slot, for slots), or, when none, how long until one
// can be.
func takeTokens(ctx context.Context, tx *sql.Tx, bs []quarantine.RateBucket, now time.Time, reserve replays.Reserver) (int, time.Time, time.Duration, error) {
	levels := make([]replays.Level, len(bs))
	for i, b := range bs {
		var t float64
		var at int64
		err := tx.QueryRowContext(ctx, `SELECT tokens, updated_at FROM replay_buckets WHERE key = ?`, b.Key).Scan(&t, &at)
		switch {
		case noRows(err):
			levels[i] = replays.Full(b, now)
		case err != nil:
			return 0, time.Time{}, 0, err
		default:
			levels[i] = replays.Level{Tokens: t, At: fromMicros(at)}
		}
	}
	n, due, wait, next := reserve(bs, levels, now)
	if n == 0 {
		// Nothing taken: the stored state refills to the same tokens
		// later, and this transaction stays a read.
		return 0, time.Time{}, wait, nil
	}
	for i, b := range bs {
		if _, err := tx.ExecContext(ctx, `INSERT INTO replay_buckets (key, tokens, updated_at) VALUES (?, ?, ?)
			ON CONFLICT (key) DO UPDATE SET tokens = excluded.tokens, updated_at = excluded.updated_at`,
			b.Key, next[i].Tokens, micros(next[i].At)); err != nil {
			return 0, time.Time{}, 0, err
		}
	}
	return n, due, 0, nil
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

// TakeReplaySlots grants up to want publish slots from every bucket at
// once (replays.Slots): the first at least lead after now, every one at
// most ahead after now. It returns how many and the first (item k's slot
// is replays.SlotTime(first, r, k), r the lowest rate of buckets), or,
// when none, how long until one is free. Errors: EINVALID for a bucket
// without key or positive rate, EUNAVAILABLE.
func (s *Store) TakeReplaySlots(ctx context.Context, bs []quarantine.RateBucket, want int, lead, ahead time.Duration) (int, time.Time, time.Duration, error) {
	return buckets.Slots(ctx, bs, want, lead, ahead, s.clock, s.take)
}

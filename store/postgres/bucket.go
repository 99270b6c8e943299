package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/replays"
)

// TakeReplayTokens takes up to want tokens from every bucket at once; see
// store.Replays. Buckets seen for the first time are inserted full, then
// every bucket row is locked in key order (SELECT … FOR UPDATE), so that
// engines sharing the database take from one budget and cannot deadlock.
// Errors: EINVALID for a bucket without key or positive rate,
// EUNAVAILABLE.
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
	err = s.inTx(ctx, "take replay tokens", func(tx pgx.Tx) (err error) {
		n, wait, err = takeTokens(ctx, tx, bs, want, s.clock())
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	return n, wait, nil
}

// takeTokens takes up to want tokens from every bucket of bs (validated,
// in key order) at now, in tx: buckets seen for the first time are
// inserted full, then every bucket row is locked in key order.
func takeTokens(ctx context.Context, tx pgx.Tx, bs []quarantine.RateBucket, want int, now time.Time) (int, time.Duration, error) {
	keys, full := mk(len(bs)), make([]float64, len(bs))
	for i, b := range bs {
		keys[i], full[i] = b.Key, replays.Capacity(b)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO replay_buckets (key, tokens, updated_at)
		SELECT k, t, $3 FROM unnest($1::text[], $2::float8[]) AS u(k, t) ORDER BY k
		ON CONFLICT (key) DO NOTHING`, keys, full, now); err != nil {
		return 0, 0, err
	}
	rows, err := tx.Query(ctx, `SELECT key, tokens, updated_at FROM replay_buckets
		WHERE key = ANY($1::text[]) ORDER BY key FOR UPDATE`, keys)
	if err != nil {
		return 0, 0, err
	}
	type state struct {
		tokens float64
		at     time.Time
	}
	stored := map[string]state{}
	var k string
	var st state
	if _, err := pgx.ForEachRow(rows, []any{&k, &st.tokens, &st.at}, func() error {
		stored[k] = st
		return nil
	}); err != nil {
		return 0, 0, err
	}
	tokens, stamps := make([]float64, len(bs)), make([]time.Time, len(bs))
	for i, b := range bs {
		st, ok := stored[b.Key]
		if !ok {
			return 0, 0, quarantine.Errorf(quarantine.EUNAVAILABLE, "a rate bucket was removed meanwhile; try again")
		}
		tokens[i] = replays.Refill(b, st.tokens, st.at, now)
		stamps[i] = now
		if st.at.After(now) { // another engine's clock is ahead: never refill twice
			stamps[i] = st.at
		}
	}
	n, wait := replays.Grant(bs, tokens, want)
	if n == 0 {
		return 0, wait, nil // nothing taken: the stored state refills to the same tokens later
	}
	for i := range tokens {
		tokens[i] -= float64(n)
	}
	_, err = tx.Exec(ctx, `UPDATE replay_buckets b SET tokens = u.t, updated_at = u.at
		FROM unnest($1::text[], $2::float8[], $3::timestamptz[]) AS u(k, t, at) WHERE b.key = u.k`,
		keys, tokens, stamps)
	if err != nil {
		return 0, 0, err
	}
	return n, wait, nil
}

// HoldReplayTokens empties bucket key until until; see store.Replays.
// Errors: EINVALID for an empty key, EUNAVAILABLE.
func (s *Store) HoldReplayTokens(ctx context.Context, key string, until time.Time) error {
	if key == "" {
		return quarantine.Errorf(quarantine.EINVALID, "a rate bucket needs a key")
	}
	return s.inTx(ctx, "hold replay tokens", func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO replay_buckets (key, tokens, updated_at) VALUES ($1, 0, $2)
			ON CONFLICT (key) DO UPDATE SET tokens = least(replay_buckets.tokens, 0),
				updated_at = greatest(replay_buckets.updated_at, excluded.updated_at)`,
			key, until.UTC().Truncate(time.Microsecond))
		return err
	})
}

package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/replays"
)

// TakeBuckets takes from bs (takeTokens): buckets seen for the first
// time are inserted full, then every bucket row is locked in key order
// (SELECT … FOR UPDATE), so that engines sharing the database take from
// one budget and cannot deadlock.
func (t replayTx) TakeBuckets(ctx context.Context, bs []quarantine.RateBucket, reserve replays.Reserver) (n int, due time.Time, wait time.Duration, err error) {
	n, due, wait, _, err = takeTokens(ctx, t.tx, bs, t.s.clock, reserve)
	return n, due, wait, err
}

// takeTokens grants from every bucket of bs (validated, in key order)
// what reserve grants, in tx: buckets seen for the first time are
// inserted full, then every bucket row is locked in key order. It
// returns how many and when they are due (the first slot, for slots), or,
// when none, how long until one can be, and now: clock's time once the
// rows were locked (the lock may have waited for another engine's
// transaction), the time they were taken at.
func takeTokens(ctx context.Context, tx pgx.Tx, bs []quarantine.RateBucket, clock func() time.Time, reserve replays.Reserver) (n int, due time.Time, wait time.Duration, now time.Time, err error) {
	keys, full := mk(len(bs)), make([]float64, len(bs))
	for i, b := range bs {
		keys[i], full[i] = b.Key, replays.Capacity(b)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO replay_buckets (key, tokens, updated_at)
		SELECT k, t, $3 FROM unnest($1::text[], $2::float8[]) AS u(k, t) ORDER BY k
		ON CONFLICT (key) DO NOTHING`, keys, full, clock().Truncate(time.Microsecond)); err != nil {
		return 0, time.Time{}, 0, time.Time{}, err
	}
	rows, err := tx.Query(ctx, `SELECT key, tokens, updated_at FROM replay_buckets
		WHERE key = ANY($1::text[]) ORDER BY key FOR UPDATE`, keys)
	if err != nil {
		return 0, time.Time{}, 0, time.Time{}, err
	}
	stored := map[string]replays.Level{}
	var k string
	var l replays.Level
	if _, err := pgx.ForEachRow(rows, []any{&k, &l.Tokens, &l.At}, func() error {
		stored[k] = l
		return nil
	}); err != nil {
		return 0, time.Time{}, 0, time.Time{}, err
	}
	now = clock()
	levels := make([]replays.Level, len(bs))
	for i, b := range bs {
		l, ok := stored[b.Key]
		if !ok {
			return 0, time.Time{}, 0, time.Time{}, quarantine.Errorf(quarantine.EUNAVAILABLE, "a rate bucket was removed meanwhile; try again")
		}
		levels[i] = l
	}
	n, due, wait, next := reserve(bs, levels, now)
	if n == 0 {
		return 0, time.Time{}, wait, now, nil // nothing taken: the stored state refills to the same tokens later
	}
	tokens, stamps := make([]float64, len(bs)), make([]time.Time, len(bs))
	for i, l := range next {
		tokens[i], stamps[i] = l.Tokens, l.At
	}
	_, err = tx.Exec(ctx, `UPDATE replay_buckets b SET tokens = u.t, updated_at = u.at
		FROM unnest($1::text[], $2::float8[], $3::timestamptz[]) AS u(k, t, at) WHERE b.key = u.k`,
		keys, tokens, stamps)
	if err != nil {
		return 0, time.Time{}, 0, time.Time{}, err
	}
	return n, due, 0, now, nil
}

// HoldBucket empties bucket key until until.
func (t replayTx) HoldBucket(ctx context.Context, key string, until time.Time) error {
	_, err := t.tx.Exec(ctx, `INSERT INTO replay_buckets (key, tokens, updated_at) VALUES ($1, 0, $2)
		ON CONFLICT (key) DO UPDATE SET tokens = least(replay_buckets.tokens, 0),
			updated_at = greatest(replay_buckets.updated_at, excluded.updated_at)`,
		key, until.UTC().Truncate(time.Microsecond))
	return err
}

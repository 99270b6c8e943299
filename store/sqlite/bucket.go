package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/replays"
)

// TakeBuckets takes from bs (takeTokens) at the store's time: the
// buckets are read and written in key order in the one write
// transaction.
func (t replayTx) TakeBuckets(ctx context.Context, bs []quarantine.RateBucket, reserve replays.Reserver) (int, time.Time, time.Duration, error) {
	return takeTokens(ctx, t.tx, bs, t.s.clock(), reserve)
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

// HoldBucket empties bucket key until until.
func (t replayTx) HoldBucket(ctx context.Context, key string, until time.Time) error {
	_, err := t.tx.ExecContext(ctx, `INSERT INTO replay_buckets (key, tokens, updated_at) VALUES (?1, 0, ?2)
		ON CONFLICT (key) DO UPDATE SET tokens = min(tokens, 0), updated_at = max(updated_at, ?2)`,
		key, micros(until.UTC().Truncate(time.Microsecond)))
	return err
}

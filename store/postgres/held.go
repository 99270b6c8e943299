package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/quarantine-dev/quarantine/store/internal/replays"
)

// HeldBy returns the batch whose item holds each of ids in flight
// (ops.Holds). The caller locked the messages in an earlier statement:
// this one reads a snapshot taken after any lease that locked them first
// committed (replays.InFlight).
func (t opsTx) HeldBy(ctx context.Context, ids []string) (map[string]string, error) {
	rows, err := t.tx.Query(ctx, `SELECT message_id, batch_id FROM replay_items
		WHERE message_id = ANY($1::text[]) AND `+replays.InFlight, ids)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	var id, by string
	_, err = pgx.ForEachRow(rows, []any{&id, &by}, func() error {
		out[id] = by
		return nil
	})
	return out, err
}

package sqlite

import (
	"context"

	"github.com/quarantine-dev/quarantine/store/internal/replays"
)

// HeldBy returns the batch whose item holds each of ids in flight
// (ops.Holds); the write transaction holds the database's one write
// lock.
func (t opsTx) HeldBy(ctx context.Context, ids []string) (map[string]string, error) {
	out := map[string]string{}
	err := scanPairs(t.tx.QueryContext(ctx, `SELECT message_id, batch_id FROM replay_items
		WHERE message_id IN (SELECT value FROM json_each(?)) AND `+replays.InFlight, jsonArray(ids)))(
		func(id, by string) { out[id] = by })
	return out, err
}

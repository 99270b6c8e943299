package postgres

import (
	"context"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/replays"
	"github.com/quarantine-dev/quarantine/store/internal/txn"
)

// MessageReplayItems returns the replay items of message id, one per
// batch that held it, the latest limit batches (by batch id: creation
// order), oldest first, read through replay_items_message_idx. An unknown
// message has none (no error). EINVALID for a limit outside
// 1..quarantine.MaxLimit.
func (s *Store) MessageReplayItems(ctx context.Context, id string, limit int) ([]quarantine.ReplayItem, error) {
	if none, ok, err := replays.MessageItems(id, limit); err != nil || !ok {
		return none, err
	}
	latest, err := txn.Get(ctx, s.snapshot, "list a message's replay items", func(tx pgx.Tx) ([]quarantine.ReplayItem, error) {
		rows, _ := tx.Query(ctx, `SELECT `+itemColumns+` FROM replay_items i WHERE i.message_id = $1
			ORDER BY i.batch_id DESC LIMIT $2`, id, limit)
		return pgx.CollectRows(rows, func(row pgx.CollectableRow) (quarantine.ReplayItem, error) {
			var r itemRow
			err := row.Scan(r.dest()...)
			return r.item(), err
		})
	})
	slices.Reverse(latest)
	return latest, err
}

package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/replays"
	"github.com/quarantine-dev/quarantine/store/internal/txn"
)

// MessageItems reads the replay items of message id, newest batch first,
// through replay_items_message_idx (replays.Reader).
func (p backend) MessageItems(ctx context.Context, id string, limit int) ([]quarantine.ReplayItem, error) {
	return txn.Get(ctx, p.s.snapshot, "list a message's replay items", func(tx pgx.Tx) ([]quarantine.ReplayItem, error) {
		rows, _ := tx.Query(ctx, `SELECT `+replays.ItemColumns+` FROM replay_items i WHERE i.message_id = $1
			ORDER BY i.batch_id DESC LIMIT $2`, id, limit)
		return pgx.CollectRows(rows, func(row pgx.CollectableRow) (quarantine.ReplayItem, error) {
			var r itemRow
			err := row.Scan(r.dest()...)
			return r.item(), err
		})
	})
}

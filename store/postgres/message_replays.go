package postgres

import (
	"context"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/replays"
)

// MessageReplayItems returns the replay items of message id, one per
// batch that held it, the latest limit batches (by batch id: creation
// order), oldest first, read through replay_items_message_idx. An unknown
// message has none (no error). EINVALID for a limit outside
// 1..quarantine.MaxLimit.
func (s *Store) MessageReplayItems(ctx context.Context, id string, limit int) ([]quarantine.ReplayItem, error) {
	out, ok, err := replays.MessageItems(id, limit)
	if err != nil || !ok {
		return out, err
	}
	opts := pgx.TxOptions{AccessMode: pgx.ReadOnly}
	err = s.inTxOpts(ctx, opts, "list a message's replay items", func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT `+itemColumns+` FROM replay_items i WHERE i.message_id = $1
			ORDER BY i.batch_id DESC LIMIT $2`, id, limit)
		if err != nil {
			return err
		}
		var r itemRow
		_, err = pgx.ForEachRow(rows, r.dest(), func() error {
			out = append(out, r.item())
			r = itemRow{}
			return nil
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	slices.Reverse(out)
	return out, nil
}

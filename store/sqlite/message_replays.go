package sqlite

import (
	"context"
	"database/sql"
	"slices"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/replays"
)

// MessageReplayItems returns the replay items of message id, one per
// batch that held it, the latest limit batches (by batch id: creation
// order), oldest first. An unknown message has none (no error). EINVALID
// for a limit outside 1..quarantine.MaxLimit.
func (s *Store) MessageReplayItems(ctx context.Context, id string, limit int) ([]quarantine.ReplayItem, error) {
	out, ok, err := replays.MessageItems(id, limit)
	if err != nil || !ok {
		return out, err
	}
	err = s.read(ctx, "list a message's replay items", func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT `+itemColumns+` FROM replay_items i WHERE i.message_id = ?
			ORDER BY i.batch_id DESC LIMIT ?`, id, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			it, err := scanItem(rows)
			if err != nil {
				return err
			}
			out = append(out, it)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	slices.Reverse(out)
	return out, nil
}

package sqlite

import (
	"context"
	"database/sql"
	"slices"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/replays"
	"github.com/quarantine-dev/quarantine/store/internal/txn"
)

// MessageReplayItems returns the replay items of message id, one per
// batch that held it, the latest limit batches (by batch id: creation
// order), oldest first. An unknown message has none (no error). EINVALID
// for a limit outside 1..quarantine.MaxLimit.
func (s *Store) MessageReplayItems(ctx context.Context, id string, limit int) ([]quarantine.ReplayItem, error) {
	if none, ok, err := replays.MessageItems(id, limit); err != nil || !ok {
		return none, err
	}
	latest, err := txn.Get(ctx, s.read, "list a message's replay items", func(tx *sql.Tx) ([]quarantine.ReplayItem, error) {
		return queryAll(ctx, tx, scanItemRow, `SELECT `+itemColumns+` FROM replay_items i WHERE i.message_id = ?
			ORDER BY i.batch_id DESC LIMIT ?`, id, limit)
	})
	slices.Reverse(latest)
	return latest, err
}

// scanItemRow reads itemColumns (scanItem without extra destinations).
func scanItemRow(r scanner) (quarantine.ReplayItem, error) { return scanItem(r) }

package sqlite

import (
	"context"
	"database/sql"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/replays"
	"github.com/quarantine-dev/quarantine/store/internal/txn"
)

// MessageItems reads the replay items of message id, newest batch first
// (replays.Reader).
func (p backend) MessageItems(ctx context.Context, id string, limit int) ([]quarantine.ReplayItem, error) {
	return txn.Get(ctx, p.s.read, "list a message's replay items", func(tx *sql.Tx) ([]quarantine.ReplayItem, error) {
		return queryAll(ctx, tx, scanItemRow, `SELECT `+replays.ItemColumns+` FROM replay_items i WHERE i.message_id = ?
			ORDER BY i.batch_id DESC LIMIT ?`, id, limit)
	})
}

// scanItemRow reads replays.ItemColumns (scanItem without extra destinations).
func scanItemRow(r scanner) (quarantine.ReplayItem, error) { return scanItem(r) }

package sqlite

import (
	"context"
	"database/sql"

	"github.com/quarantine-dev/quarantine/store/internal/ops"
)

// MessageOwners implements store.Store: one query for every id (a JSON
// array parameter).
func (s *Store) MessageOwners(ctx context.Context, ids []string) (map[string]string, error) {
	out, ids := ops.OwnersQuery(ids)
	if len(ids) == 0 {
		return out, nil
	}
	err := s.read(ctx, "read the owners of messages", func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT id, owner FROM messages WHERE id IN (SELECT value FROM json_each(?))`, jsonArray(ids))
		if err != nil {
			return err
		}
		defer rows.Close()
		return ops.ReadOwners(rows, out)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

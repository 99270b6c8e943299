package postgres

import (
	"context"

	"github.com/quarantine-dev/quarantine/store/internal/ops"
)

// MessageOwners implements store.Store: one query for every id.
func (s *Store) MessageOwners(ctx context.Context, ids []string) (map[string]string, error) {
	out, ids := ops.OwnersQuery(ids)
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT id, owner FROM messages WHERE id = ANY($1)`, ids)
	if err != nil {
		return nil, translate(err, "read the owners of messages")
	}
	defer rows.Close()
	if err := ops.ReadOwners(rows, out); err != nil {
		return nil, translate(err, "read the owners of messages")
	}
	return out, nil
}

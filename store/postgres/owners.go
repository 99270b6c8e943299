package postgres

import (
	"context"

	"github.com/quarantine-dev/quarantine"
)

// MessageOwners implements store.Store: one query for every id.
func (s *Store) MessageOwners(ctx context.Context, ids []string) (map[string]string, error) {
	out := make(map[string]string, len(ids))
	ids = validIDs(ids)
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT id, owner FROM messages WHERE id = ANY($1)`, ids)
	if err != nil {
		return nil, translate(err, "read the owners of messages")
	}
	defer rows.Close()
	for rows.Next() {
		var id, owner string
		if err := rows.Scan(&id, &owner); err != nil {
			return nil, translate(err, "read the owners of messages")
		}
		out[id] = owner
	}
	return out, translate(rows.Err(), "read the owners of messages")
}

// validIDs drops what cannot be a message id (hostile bytes included):
// no message has it.
func validIDs(ids []string) []string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if quarantine.ValidID(id) {
			out = append(out, id)
		}
	}
	return out
}

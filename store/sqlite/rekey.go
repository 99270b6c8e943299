package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/ops"
)

// RekeyMessages implements store.Store.
func (s *Store) RekeyMessages(ctx context.Context, r quarantine.Rekey) ([]string, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	var done []string
	err := s.write(ctx, "re-key messages", func(tx *sql.Tx) error {
		var err error
		done, err = ops.Rekey(r, ops.RekeyTx{
			Get: func(id string) (ops.KeyRow, error) {
				rows, err := tx.QueryContext(ctx, `SELECT idempotency_key, key_rule, flags FROM messages WHERE id = ?`, id)
				if err != nil {
					return ops.KeyRow{}, err
				}
				defer rows.Close()
				return ops.ReadKeyRow(rows)
			},
			Set: func(id, key, rule string, flags []string) error {
				f, _ := json.Marshal(append([]string{}, flags...)) // strings always marshal
				_, err := tx.ExecContext(ctx, `UPDATE messages SET idempotency_key = ?, key_rule = ?, flags = ?, updated_at = ? WHERE id = ?`,
					key, rule, string(f), micros(s.clock()), id)
				return err
			},
			Audit: func(events []*quarantine.AuditEvent) error { return s.appendAudits(ctx, tx, events) },
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return done, nil
}

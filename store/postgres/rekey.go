package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/ops"
)

// RekeyMessages implements store.Store.
func (s *Store) RekeyMessages(ctx context.Context, r quarantine.Rekey) ([]string, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	var done []string
	err := s.inTx(ctx, "re-key messages", func(tx pgx.Tx) error {
		var err error
		done, err = ops.Rekey(r, ops.RekeyTx{
			Get: func(id string) (ops.KeyRow, error) {
				rows, err := tx.Query(ctx, `SELECT idempotency_key, key_rule, flags FROM messages WHERE id = $1 FOR UPDATE`, id)
				if err != nil {
					return ops.KeyRow{}, err
				}
				defer rows.Close()
				return ops.ReadKeyRow(rows)
			},
			Set: func(id, key, rule string, flags []string) error {
				_, err := tx.Exec(ctx, `UPDATE messages SET idempotency_key = $2, key_rule = $3, flags = $4, updated_at = $5 WHERE id = $1`,
					id, key, rule, encodeFlags(flags), s.clock())
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

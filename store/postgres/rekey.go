package postgres

import (
	"context"

	"github.com/quarantine-dev/quarantine/store/internal/ops"
)

// The statements of a re-key (ops.RekeyTx), in an opsTx.

func (t opsTx) KeyRow(ctx context.Context, id string) (ops.KeyRow, error) {
	rows, err := t.tx.Query(ctx, `SELECT idempotency_key, key_rule, flags FROM messages WHERE id = $1 FOR UPDATE`, id)
	if err != nil {
		return ops.KeyRow{}, err
	}
	defer rows.Close()
	return ops.ReadKeyRow(rows)
}

func (t opsTx) SetKey(ctx context.Context, id, key, rule string, flags []string) error {
	_, err := t.tx.Exec(ctx, `UPDATE messages SET idempotency_key = $2, key_rule = $3, flags = $4, updated_at = $5 WHERE id = $1`,
		id, key, rule, encodeFlags(flags), t.s.clock())
	return err
}

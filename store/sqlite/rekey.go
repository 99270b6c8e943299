package sqlite

import (
	"context"
	"encoding/json"

	"github.com/quarantine-dev/quarantine/store/internal/ops"
)

// The statements of a re-key (ops.RekeyTx), in an opsTx.

func (t opsTx) KeyRow(ctx context.Context, id string) (ops.KeyRow, error) {
	rows, err := t.tx.QueryContext(ctx, `SELECT idempotency_key, key_rule, flags FROM messages WHERE id = ?`, id)
	if err != nil {
		return ops.KeyRow{}, err
	}
	defer rows.Close()
	return ops.ReadKeyRow(rows)
}

func (t opsTx) SetKey(ctx context.Context, id, key, rule string, flags []string) error {
	f, _ := json.Marshal(append([]string{}, flags...)) // strings always marshal
	_, err := t.tx.ExecContext(ctx, `UPDATE messages SET idempotency_key = ?, key_rule = ?, flags = ?, updated_at = ? WHERE id = ?`,
		key, rule, string(f), micros(t.s.clock()), id)
	return err
}

package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/ops"
	"github.com/quarantine-dev/quarantine/store/internal/txn"
)

// RekeyMessages implements store.Store.
func (s *Store) RekeyMessages(ctx context.Context, r quarantine.Rekey) ([]string, error) {
	return txn.Get(ctx, s.write, "re-key messages", func(tx *sql.Tx) ([]string, error) {
		return ops.Rekey(ctx, r, rekeyTx{replayTx{s: s, tx: tx}})
	})
}

// rekeyTx is one transaction of the store as the shared re-key flow
// (ops.Rekey) uses it.
type rekeyTx struct{ replayTx }

var _ ops.RekeyTx = rekeyTx{}

func (t rekeyTx) KeyRow(ctx context.Context, id string) (ops.KeyRow, error) {
	rows, err := t.tx.QueryContext(ctx, `SELECT idempotency_key, key_rule, flags FROM messages WHERE id = ?`, id)
	if err != nil {
		return ops.KeyRow{}, err
	}
	defer rows.Close()
	return ops.ReadKeyRow(rows)
}

func (t rekeyTx) SetKey(ctx context.Context, id, key, rule string, flags []string) error {
	f, _ := json.Marshal(append([]string{}, flags...)) // strings always marshal
	_, err := t.tx.ExecContext(ctx, `UPDATE messages SET idempotency_key = ?, key_rule = ?, flags = ?, updated_at = ? WHERE id = ?`,
		key, rule, string(f), micros(t.s.clock()), id)
	return err
}

package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/ops"
	"github.com/quarantine-dev/quarantine/store/internal/txn"
)

// RekeyMessages implements store.Store.
func (s *Store) RekeyMessages(ctx context.Context, r quarantine.Rekey) ([]string, error) {
	return txn.Get(ctx, s.inTx, "re-key messages", func(tx pgx.Tx) ([]string, error) {
		return ops.Rekey(ctx, r, rekeyTx{replayTx{s: s, tx: tx}})
	})
}

// rekeyTx is one transaction of the store as the shared re-key flow
// (ops.Rekey) uses it.
type rekeyTx struct{ replayTx }

var _ ops.RekeyTx = rekeyTx{}

func (t rekeyTx) KeyRow(ctx context.Context, id string) (ops.KeyRow, error) {
	rows, err := t.tx.Query(ctx, `SELECT idempotency_key, key_rule, flags FROM messages WHERE id = $1 FOR UPDATE`, id)
	if err != nil {
		return ops.KeyRow{}, err
	}
	defer rows.Close()
	return ops.ReadKeyRow(rows)
}

func (t rekeyTx) SetKey(ctx context.Context, id, key, rule string, flags []string) error {
	_, err := t.tx.Exec(ctx, `UPDATE messages SET idempotency_key = $2, key_rule = $3, flags = $4, updated_at = $5 WHERE id = $1`,
		id, key, rule, encodeFlags(flags), t.s.clock())
	return err
}

package sqlite

import (
	"context"
	"database/sql"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/notfound"
	"github.com/quarantine-dev/quarantine/store/internal/ops"
	"github.com/quarantine-dev/quarantine/store/internal/txn"
)

// EditPayload stores e.Payload as the message's next payload version; see
// store.Store. The check of e.IfMatch and the write happen in one write
// transaction, and SQLite has one writer: of concurrent edits with the
// same IfMatch exactly one wins, the others get EPRECONDITION. Errors:
// EINVALID or EUNPROCESSABLE for a bad edit (e.Validate), ENOTFOUND,
// ECONFLICT while replaying or once discarded, EPRECONDITION,
// EUNPROCESSABLE when the payload is unchanged (e.CheckCurrent),
// EUNAVAILABLE.
func (s *Store) EditPayload(ctx context.Context, e quarantine.PayloadEdit) (*quarantine.Message, error) {
	if err := ops.CheckEdit(e); err != nil {
		return nil, err
	}
	return txn.Get(ctx, s.write, "edit a payload", func(tx *sql.Tx) (*quarantine.Message, error) {
		return ops.Edit(ctx, e, editTx{replayTx{s: s, tx: tx}})
	})
}

// editTx is one transaction of the store as the shared edit flow
// (ops.Edit) uses it.
type editTx struct{ replayTx }

var _ ops.EditTx = editTx{}

func (t editTx) Current(ctx context.Context, id string) (cur ops.Current, err error) {
	err = t.tx.QueryRowContext(ctx, `SELECT status, payload_sha256, payload_version, content_type
		FROM messages WHERE id = ?`, id).Scan(&cur.Status, &cur.SHA256, &cur.Version, &cur.ContentType)
	return cur, orNotFound(err, notfound.Message(id))
}

func (t editTx) WritePayload(ctx context.Context, e quarantine.PayloadEdit, p ops.EditPlan) error {
	now := micros(t.s.clock())
	blob, text := splitPayload(e.Payload)
	if _, err := t.tx.ExecContext(ctx, insertVersion, e.MessageID, p.Version, p.SHA256, p.PrevSHA256, len(e.Payload),
		p.ContentType, p.Actor, e.Reason, now, blob, text); err != nil {
		return err
	}
	_, err := t.tx.ExecContext(ctx, `UPDATE messages SET payload_sha256 = ?, payload_version = ?,
		payload_size = ?, content_type = ?, updated_at = ? WHERE id = ?`,
		p.SHA256, p.Version, len(e.Payload), p.ContentType, now, e.MessageID)
	return err
}

func (t editTx) Message(ctx context.Context, id string) (*quarantine.Message, error) {
	return getMessage(ctx, t.tx, id)
}

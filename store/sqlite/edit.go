package sqlite

import (
	"context"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/notfound"
	"github.com/quarantine-dev/quarantine/store/internal/ops"
)

// The statements of an edit (ops.EditTx), in an opsTx.

func (t opsTx) Current(ctx context.Context, id string) (cur ops.Current, err error) {
	err = t.tx.QueryRowContext(ctx, `SELECT status, payload_sha256, payload_version, content_type
		FROM messages WHERE id = ?`, id).Scan(&cur.Status, &cur.SHA256, &cur.Version, &cur.ContentType)
	return cur, orNotFound(err, notfound.Message(id))
}

func (t opsTx) WritePayload(ctx context.Context, e quarantine.PayloadEdit, p ops.EditPlan) error {
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

func (t opsTx) Message(ctx context.Context, id string) (*quarantine.Message, error) {
	return getMessage(ctx, t.tx, id)
}

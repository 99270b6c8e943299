package postgres

import (
	"context"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/notfound"
	"github.com/quarantine-dev/quarantine/store/internal/ops"
)

// The statements of an edit (ops.EditTx), in an opsTx.

func (t opsTx) Current(ctx context.Context, id string) (cur ops.Current, err error) {
	err = t.tx.QueryRow(ctx, `SELECT status, payload_sha256, payload_version, content_type
		FROM messages WHERE id = $1 FOR UPDATE`, id).Scan(&cur.Status, &cur.SHA256, &cur.Version, &cur.ContentType)
	return cur, orNotFound(err, notfound.Message(id))
}

func (t opsTx) WritePayload(ctx context.Context, e quarantine.PayloadEdit, p ops.EditPlan) error {
	now := t.s.clock()
	bin, txt := splitPayload(e.Payload)
	if _, err := t.tx.Exec(ctx, `INSERT INTO payload_versions (message_id, version, sha256, prev_sha256,
		size, content_type, actor, reason, created_at, payload, payload_text)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
		e.MessageID, p.Version, p.SHA256, p.PrevSHA256, len(e.Payload), p.ContentType, p.Actor,
		e.Reason, now, bin, txt); err != nil {
		return err
	}
	_, err := t.tx.Exec(ctx, `UPDATE messages SET payload_sha256 = $2, payload_version = $3,
		payload_size = $4, content_type = $5, updated_at = $6 WHERE id = $1`,
		e.MessageID, p.SHA256, p.Version, len(e.Payload), p.ContentType, now)
	return err
}

func (t opsTx) Message(ctx context.Context, id string) (*quarantine.Message, error) {
	return getMessage(ctx, t.tx, id)
}

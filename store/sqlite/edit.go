package sqlite

import (
	"context"
	"database/sql"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/notfound"
	"github.com/quarantine-dev/quarantine/store/internal/ops"
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
	var out *quarantine.Message
	err := s.write(ctx, "edit a payload", func(tx *sql.Tx) error {
		var err error
		out, err = ops.Edit(e, ops.EditTx{
			Current: func() (cur ops.Current, err error) {
				err = tx.QueryRowContext(ctx, `SELECT status, payload_sha256, payload_version, content_type
					FROM messages WHERE id = ?`, e.MessageID).Scan(&cur.Status, &cur.SHA256, &cur.Version, &cur.ContentType)
				return cur, orNotFound(err, notfound.Message(e.MessageID))
			},
			Write: func(p ops.EditPlan, payload []byte) error {
				now := micros(s.clock())
				blob, text := splitPayload(payload)
				if _, err := tx.ExecContext(ctx, insertVersion, e.MessageID, p.Version, p.SHA256, p.PrevSHA256, len(payload),
					p.ContentType, p.Actor, e.Reason, now, blob, text); err != nil {
					return err
				}
				_, err := tx.ExecContext(ctx, `UPDATE messages SET payload_sha256 = ?, payload_version = ?,
					payload_size = ?, content_type = ?, updated_at = ? WHERE id = ?`,
					p.SHA256, p.Version, len(payload), p.ContentType, now, e.MessageID)
				return err
			},
			Audit: func(ev *quarantine.AuditEvent) error { _, err := s.appendAudit(ctx, tx, *ev); return err },
			Get:   func() (*quarantine.Message, error) { return getMessage(ctx, tx, e.MessageID) },
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

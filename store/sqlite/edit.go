package sqlite

import (
	"context"
	"database/sql"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/notfound"
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
	if err := e.Validate(); err != nil {
		return nil, err
	}
	if !quarantine.ValidID(e.MessageID) {
		return nil, notfound.Message(e.MessageID)
	}
	ctype := quarantine.SanitizeText(e.ContentType)
	var out *quarantine.Message
	err := s.write(ctx, "edit a payload", func(tx *sql.Tx) error {
		var status quarantine.Status
		var sha, curType string
		var version int
		err := tx.QueryRowContext(ctx, `SELECT status, payload_sha256, payload_version, content_type
			FROM messages WHERE id = ?`, e.MessageID).Scan(&status, &sha, &version, &curType)
		if err != nil {
			return orNotFound(err, notfound.Message(e.MessageID))
		}
		if err := status.Editable(); err != nil {
			return err
		}
		if err := e.CheckCurrent(sha); err != nil {
			return err
		}
		if ctype == "" {
			ctype = curType
		}
		now := s.clock()
		next := version + 1
		newSHA := quarantine.PayloadHash(e.Payload)
		blob, text := splitPayload(e.Payload)
		if _, err := tx.ExecContext(ctx, insertVersion, e.MessageID, next, newSHA, sha, len(e.Payload), ctype,
			quarantine.SanitizeText(e.Actor), e.Reason, micros(now), blob, text); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE messages SET payload_sha256 = ?, payload_version = ?,
			payload_size = ?, content_type = ?, updated_at = ? WHERE id = ?`,
			newSHA, next, len(e.Payload), ctype, micros(now), e.MessageID); err != nil {
			return err
		}
		ev := quarantine.NewAuditEvent(e.Actor, quarantine.ActionEdit, e.MessageID, map[string]any{
			"version": next, "old_sha256": sha, "new_sha256": newSHA, "reason": e.Reason,
		})
		if _, err := s.appendAudit(ctx, tx, ev); err != nil {
			return err
		}
		out, err = getMessage(ctx, tx, e.MessageID)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

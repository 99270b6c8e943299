package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/notfound"
)

// EditPayload stores e.Payload as the message's next payload version; see
// store.Store. The message row is locked (SELECT … FOR UPDATE) before its
// hash is compared with e.IfMatch, so of concurrent edits with the same
// IfMatch exactly one wins and the others get EPRECONDITION. Errors:
// EINVALID or EUNPROCESSABLE for a bad edit (e.Validate), ENOTFOUND,
// ECONFLICT while replaying or once discarded, EPRECONDITION,
// EUNPROCESSABLE when the payload is unchanged (e.CheckCurrent),
// EUNAVAILABLE, EINTERNAL.
func (s *Store) EditPayload(ctx context.Context, e quarantine.PayloadEdit) (*quarantine.Message, error) {
	if err := e.Validate(); err != nil {
		return nil, err
	}
	if !quarantine.ValidID(e.MessageID) {
		return nil, notfound.Message(e.MessageID)
	}
	ctype := quarantine.SanitizeText(e.ContentType)
	var out *quarantine.Message
	err := s.inTx(ctx, "edit a payload", func(tx pgx.Tx) error {
		var status quarantine.Status
		var sha, curType string
		var version int
		err := tx.QueryRow(ctx, `SELECT status, payload_sha256, payload_version, content_type
			FROM messages WHERE id = $1 FOR UPDATE`, e.MessageID).Scan(&status, &sha, &version, &curType)
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
		bin, txt := splitPayload(e.Payload)
		if _, err := tx.Exec(ctx, `INSERT INTO payload_versions (message_id, version, sha256, prev_sha256,
			size, content_type, actor, reason, created_at, payload, payload_text)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
			e.MessageID, next, newSHA, sha, len(e.Payload), ctype, quarantine.SanitizeText(e.Actor),
			e.Reason, now, bin, txt); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE messages SET payload_sha256 = $2, payload_version = $3,
			payload_size = $4, content_type = $5, updated_at = $6 WHERE id = $1`,
			e.MessageID, newSHA, next, len(e.Payload), ctype, now); err != nil {
			return err
		}
		ev := quarantine.NewAuditEvent(e.Actor, quarantine.ActionEdit, e.MessageID, map[string]any{
			"version": next, "old_sha256": sha, "new_sha256": newSHA, "reason": e.Reason,
		})
		if err := s.appendAudit(ctx, tx, &ev); err != nil {
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

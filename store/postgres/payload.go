package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/notfound"
)

const versionColumns = `message_id, version, sha256, prev_sha256, size, content_type, actor, reason, created_at`

// PayloadVersions returns every payload the message held, oldest first,
// without bytes. Errors: ENOTFOUND when the message does not exist,
// EUNAVAILABLE, EINTERNAL.
func (s *Store) PayloadVersions(ctx context.Context, messageID string) ([]quarantine.PayloadVersion, error) {
	if !quarantine.ValidID(messageID) {
		return nil, notfound.Message(messageID)
	}
	var out []quarantine.PayloadVersion
	err := s.snapshot(ctx, "list payload versions", func(tx pgx.Tx) error {
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM messages WHERE id = $1)`, messageID).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			return notfound.Message(messageID)
		}
		rows, err := tx.Query(ctx, `SELECT `+versionColumns+` FROM payload_versions WHERE message_id = $1 ORDER BY version`, messageID)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (quarantine.PayloadVersion, error) {
			var v quarantine.PayloadVersion
			err := row.Scan(versionDest(&v)...)
			v.CreatedAt = v.CreatedAt.UTC()
			return v, err
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// PayloadVersion returns one version of a message's payload with its
// bytes. Errors: ENOTFOUND, EUNAVAILABLE, EINTERNAL.
func (s *Store) PayloadVersion(ctx context.Context, messageID string, version int) (*quarantine.PayloadVersion, error) {
	if !quarantine.ValidID(messageID) {
		return nil, notfound.PayloadVersion(messageID, version)
	}
	var v quarantine.PayloadVersion
	var bin []byte
	var txt *string
	err := s.pool.QueryRow(ctx, `SELECT `+versionColumns+`, payload, payload_text
		FROM payload_versions WHERE message_id = $1 AND version = $2`, messageID, version).
		Scan(append(versionDest(&v), &bin, &txt)...)
	if err != nil {
		return nil, translate(orNotFound(err, notfound.PayloadVersion(messageID, version)), "get a payload version")
	}
	v.CreatedAt = v.CreatedAt.UTC()
	v.Payload = joinPayload(bin, txt)
	return &v, nil
}

func versionDest(v *quarantine.PayloadVersion) []any {
	return []any{&v.MessageID, &v.Version, &v.SHA256, &v.PrevSHA256, &v.Size, &v.ContentType, &v.Actor, &v.Reason, &v.CreatedAt}
}

package sqlite

import (
	"context"
	"database/sql"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/notfound"
)

const versionColumns = `message_id, version, sha256, prev_sha256, size, content_type, actor, reason, created_at`

func scanVersion(r scanner, extra ...any) (*quarantine.PayloadVersion, error) {
	var v quarantine.PayloadVersion
	var created int64
	dest := []any{&v.MessageID, &v.Version, &v.SHA256, &v.PrevSHA256, &v.Size, &v.ContentType, &v.Actor, &v.Reason, &created}
	if err := r.Scan(append(dest, extra...)...); err != nil {
		return nil, err
	}
	v.CreatedAt = fromMicros(created)
	return &v, nil
}

// PayloadVersions returns every payload version of the message, oldest
// first, without bytes; ENOTFOUND if the message does not exist.
func (s *Store) PayloadVersions(ctx context.Context, messageID string) ([]quarantine.PayloadVersion, error) {
	notFound := notfound.Message(messageID)
	if !quarantine.ValidID(messageID) {
		return nil, notFound
	}
	var out []quarantine.PayloadVersion
	err := s.read(ctx, "list payload versions", func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT `+versionColumns+` FROM payload_versions
			WHERE message_id = ? ORDER BY version`, messageID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			v, err := scanVersion(rows)
			if err != nil {
				return err
			}
			out = append(out, *v)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if len(out) == 0 {
			return notFound // every stored message has version 1
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// PayloadVersion returns one version with its bytes, or ENOTFOUND.
func (s *Store) PayloadVersion(ctx context.Context, messageID string, version int) (*quarantine.PayloadVersion, error) {
	notFound := notfound.PayloadVersion(messageID, version)
	if !quarantine.ValidID(messageID) {
		return nil, notFound
	}
	var v *quarantine.PayloadVersion
	err := s.read(ctx, "read a payload version", func(tx *sql.Tx) error {
		var blob []byte
		var text sql.NullString
		var err error
		row := tx.QueryRowContext(ctx, `SELECT `+versionColumns+`, payload, payload_text FROM payload_versions
			WHERE message_id = ? AND version = ?`, messageID, version)
		v, err = scanVersion(row, &blob, &text)
		if err != nil {
			return orNotFound(err, notFound)
		}
		v.Payload = joinPayload(blob, text)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return v, nil
}

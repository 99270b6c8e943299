package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// notPurged is the condition on a message whose payload is still there
// (payload_purged is 1 exactly when flags hold payload_purged: migration
// 0012); messages_purge is partial on it (and on the terminal statuses).
const notPurged = `payload_purged = 0`

// purgeFlag appends "payload_purged" to the JSON array of flags.
const purgeFlag = `CASE WHEN flags = '[]' THEN '["` + quarantine.FlagPayloadPurged + `"]'
	ELSE substr(flags, 1, length(flags) - 1) || ',"` + quarantine.FlagPayloadPurged + `"]' END`

// PurgePayloads removes the payload bytes of up to limit messages in
// status st last updated before before, oldest first; see store.Store.
// The bytes of every version become an empty blob (the schema keeps
// exactly one copy column set); hashes, sizes and content types stay; the
// message gains the payload_purged flag and keeps its updated_at. One
// retention.purge event by actor lists the ids (details: status, before,
// ids); nothing purged appends nothing. Errors: EINVALID for an unknown
// status or a limit outside 1..quarantine.MaxBulk, EUNAVAILABLE.
func (s *Store) PurgePayloads(ctx context.Context, st quarantine.Status, before time.Time, limit int, actor string) (quarantine.PurgeResult, error) {
	if !st.Valid() {
		return quarantine.PurgeResult{}, quarantine.FieldErrorf(quarantine.EINVALID, "status", "unknown status %q", quarantine.SanitizeText(string(st)))
	}
	if limit < 1 || limit > quarantine.MaxBulk {
		return quarantine.PurgeResult{}, quarantine.FieldErrorf(quarantine.EINVALID, "limit", "limit must be between 1 and %d", quarantine.MaxBulk)
	}
	if actor == "" {
		return quarantine.PurgeResult{}, quarantine.Errorf(quarantine.EINTERNAL, "a purge needs an actor")
	}
	res := quarantine.PurgeResult{Purged: []string{}}
	err := s.write(ctx, "purge payloads", func(tx *sql.Tx) error {
		res.Purged = []string{}
		// st is one of the known statuses: a literal, so that the planner
		// can match the partial index.
		ids, err := queryStrings(ctx, tx, `SELECT id FROM messages
			WHERE status = '`+string(st)+`' AND updated_at < ? AND `+notPurged+`
			ORDER BY updated_at, id LIMIT ?`, []any{micros(before), limit})
		if err != nil || len(ids) == 0 {
			return err
		}
		list := jsonArray(ids)
		if _, err := tx.ExecContext(ctx, `UPDATE payload_versions SET payload = X'', payload_text = NULL
			WHERE message_id IN (SELECT value FROM json_each(?))`, list); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE messages SET flags = `+purgeFlag+`, payload_purged = 1
			WHERE id IN (SELECT value FROM json_each(?))`, list); err != nil {
			return err
		}
		res.Purged = ids
		ev := quarantine.NewAuditEvent(actor, quarantine.ActionPurge, "retention:"+string(st), map[string]any{
			"status": st, "before": before.UTC().Format(time.RFC3339Nano), "ids": ids,
		})
		_, err = s.appendAudit(ctx, tx, ev)
		return err
	})
	if err != nil {
		return quarantine.PurgeResult{}, err
	}
	return res, nil
}

package postgres

import (
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quarantine-dev/quarantine"
)

// purgeFlag appends "payload_purged" to the JSON array of flags.
const purgeFlag = `CASE WHEN flags = '[]' THEN '["` + quarantine.FlagPayloadPurged + `"]'
	ELSE left(flags, -1) || ',"` + quarantine.FlagPayloadPurged + `"]' END`

// notPurged is the condition on a message whose payload is still there;
// messages_purge_idx is partial on it (and on the terminal statuses).
const notPurged = `flags NOT LIKE '%"` + quarantine.FlagPayloadPurged + `"%'`

// purgeSelect selects the messages to purge in status st, oldest first.
// st is one of the known statuses, written as a literal so that the
// planner can match the partial index messages_purge_idx.
func purgeSelect(st quarantine.Status) string {
	return `SELECT id FROM messages WHERE status = '` + string(st) + `' AND updated_at < $1 AND ` + notPurged + `
		ORDER BY updated_at, id LIMIT $2`
}

// purgeLock locks the selected messages in id order (the order every
// writer of several messages takes) and keeps those still to purge.
func purgeLock(st quarantine.Status) string {
	return `SELECT id FROM messages WHERE id = ANY($1::text[]) AND status = '` + string(st) + `'
		AND updated_at < $2 AND ` + notPurged + ` ORDER BY id FOR UPDATE`
}

// PurgePayloads removes the payload bytes of up to limit messages in
// status st last updated before before, oldest first; see store.Store.
// Hashes, sizes and content types stay; the bytes of every version become
// NULL; the message gains the payload_purged flag (its updated_at is kept,
// so that it still says when the message reached st). One
// retention.purge event by actor lists the ids (details: status, before,
// ids); nothing purged appends nothing. Errors: EINVALID for an unknown
// status or a limit outside 1..quarantine.MaxBulk, EUNAVAILABLE, EINTERNAL.
func (s *Store) PurgePayloads(ctx context.Context, st quarantine.Status, before time.Time, limit int, actor string) (quarantine.PurgeResult, error) {
	if !st.Valid() {
		return quarantine.PurgeResult{}, quarantine.FieldErrorf(quarantine.EINVALID, "status", "unknown status %q", quarantine.Clip(string(st)))
	}
	if limit < 1 || limit > quarantine.MaxBulk {
		return quarantine.PurgeResult{}, quarantine.FieldErrorf(quarantine.EINVALID, "limit", "limit must be between 1 and %d", quarantine.MaxBulk)
	}
	if actor == "" {
		return quarantine.PurgeResult{}, quarantine.Errorf(quarantine.EINTERNAL, "a purge needs an actor")
	}
	res := quarantine.PurgeResult{Purged: []string{}}
	err := s.inTx(ctx, "purge payloads", func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, purgeSelect(st), before, limit)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil || len(ids) == 0 {
			return err
		}
		if rows, err = tx.Query(ctx, purgeLock(st), ids, before); err != nil {
			return err
		}
		locked, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		keep := make(map[string]bool, len(locked))
		for _, id := range locked {
			keep[id] = true
		}
		ids = slices.DeleteFunc(ids, func(id string) bool { return !keep[id] })
		if len(ids) == 0 {
			return nil
		}
		if _, err := tx.Exec(ctx, `UPDATE payload_versions SET payload = NULL, payload_text = NULL
			WHERE message_id = ANY($1::text[])`, ids); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE messages SET flags = `+purgeFlag+` WHERE id = ANY($1::text[])`, ids); err != nil {
			return err
		}
		ev := quarantine.NewAuditEvent(actor, quarantine.ActionPurge, "retention:"+string(st), map[string]any{
			"status": st, "before": before.UTC().Format(time.RFC3339Nano), "ids": ids,
		})
		res.Purged = ids
		return s.appendAudit(ctx, tx, &ev)
	})
	if err != nil {
		return quarantine.PurgeResult{}, err
	}
	return res, nil
}

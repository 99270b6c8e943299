package ops

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/quarantine-dev/quarantine"
)

// KeyRow is a message's key, key rule and flags as a re-key reads them
// (its row locked, where the store locks rows).
type KeyRow struct {
	Found bool
	Key   string
	Rule  string
	Flags []string
}

// Rows is what ReadKeyRow needs of a query's rows (database/sql's and
// pgx's).
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// ReadKeyRow reads the key row of a query selecting idempotency_key,
// key_rule and flags (JSON text) of at most one message; Found is false
// when rows is empty.
func ReadKeyRow(rows Rows) (row KeyRow, err error) {
	for rows.Next() {
		var flags string
		if err := rows.Scan(&row.Key, &row.Rule, &flags); err != nil {
			return row, err
		}
		row.Found = true
		if err := json.Unmarshal([]byte(flags), &row.Flags); err != nil {
			return row, err
		}
	}
	return row, rows.Err()
}

// RekeyTx is what the re-key flow needs of a store's transaction.
type RekeyTx interface {
	// KeyRow reads (and on PostgreSQL locks) the key, key rule and flags
	// of message id; Found false when there is none.
	KeyRow(ctx context.Context, id string) (KeyRow, error)
	// SetKey sets them, with updated_at from the store's clock.
	SetKey(ctx context.Context, id, key, rule string, flags []string) error
	// AppendAudits appends events to the audit log.
	AppendAudits(ctx context.Context, events []*quarantine.AuditEvent) error
}

// Rekey applies the changes of r whose message still has the old key and
// rule: key, rule and flags (missing_idempotency_key dropped) are set and
// one message.rekey event per message is appended. It returns the ids
// changed; the others are stale.
func Rekey(ctx context.Context, r quarantine.Rekey, tx RekeyTx) ([]string, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	changes := slices.Clone(r.Changes)
	slices.SortFunc(changes, func(a, b quarantine.KeyChange) int { return strings.Compare(a.ID, b.ID) }) // lock order
	var done []string
	var events []*quarantine.AuditEvent
	for _, c := range changes {
		row, err := tx.KeyRow(ctx, c.ID)
		if err != nil {
			return nil, err
		}
		if !row.Found || row.Key != c.OldKey || !quarantine.SameKeyRule(row.Rule, c.OldRule) {
			continue
		}
		flags := slices.DeleteFunc(slices.Clone(row.Flags), func(f string) bool { return f == quarantine.FlagMissingIdempotencyKey })
		if err := tx.SetKey(ctx, c.ID, quarantine.SanitizeText(c.NewKey), quarantine.SanitizeText(c.NewRule), flags); err != nil {
			return nil, err
		}
		ev := quarantine.NewAuditEvent(r.Actor, quarantine.ActionRekey, c.ID, map[string]string{
			"old_key": c.OldKey, "new_key": c.NewKey, "old_rule": c.OldRule, "new_rule": c.NewRule, "reason": r.Reason})
		events = append(events, &ev)
		done = append(done, c.ID)
	}
	if len(events) > 0 {
		if err := tx.AppendAudits(ctx, events); err != nil {
			return nil, err
		}
	}
	return done, nil
}

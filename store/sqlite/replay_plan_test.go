package sqlite

import (
	"database/sql"
	"slices"
	"strings"
	"testing"
)

// The replay's status moves look their messages up by id, never through
// the status index (which would read every quarantined message per chunk).
func TestReplayMovesLookMessagesUpByID(t *testing.T) {
	t.Parallel()
	s := openTest(t)
	for name, c := range map[string]struct {
		q    string
		args []any
	}{
		"move":        {`UPDATE messages SET status = 'replayed', updated_at = 0` + moveWhere, []any{sql.Named("ids", "[]"), sql.Named("from", "replaying")}},
		"late record": {lateRecordSQL, []any{0, "[]"}},
	} {
		plan := queryPlan(t, s, c.q, c.args...)
		byID := slices.ContainsFunc(plan, func(d string) bool {
			return strings.HasPrefix(d, "SEARCH messages USING INDEX sqlite_autoindex_messages_1 (id=?)")
		})
		if !byID || slices.ContainsFunc(plan, func(d string) bool { return strings.Contains(d, "messages_status") }) {
			t.Errorf("%s: plan %v, want the messages looked up by id", name, plan)
		}
	}
}

// A discard chunk's status move finds its messages by rowid (the rows its
// selection read), neither through the primary key's index nor through
// the status index.
func TestDiscardMoveLooksMessagesUpByRowid(t *testing.T) {
	t.Parallel()
	s := openTest(t)
	plan := queryPlan(t, s, `UPDATE OR ROLLBACK messages SET status = 'discarded', updated_at = 0`+moveWhereRowid,
		sql.Named("ids", "[]"), sql.Named("from", "quarantined"))
	byRowid := slices.ContainsFunc(plan, func(d string) bool {
		return strings.HasPrefix(d, "SEARCH messages USING INTEGER PRIMARY KEY (rowid=?)")
	})
	if !byRowid || slices.ContainsFunc(plan, func(d string) bool {
		return strings.Contains(d, "messages_status") || strings.Contains(d, "sqlite_autoindex_messages_1")
	}) {
		t.Errorf("plan %v, want the messages looked up by rowid", plan)
	}
}

package sqlite

import (
	"strings"
	"testing"
)

// TestStatusTriggersHoldNoUpsert: every trigger an UPDATE of messages
// compiles (those on UPDATE, or UPDATE OF status) holds no ON CONFLICT
// clause, whose DO UPDATE SQLite codes with ABORT whatever the outer
// statement's conflict clause: the stores' UPDATE OR ROLLBACK of many
// messages (moveGroups, markDiscarded) would keep its statement journal
// again (migration 0021).
func TestStatusTriggersHoldNoUpsert(t *testing.T) {
	t.Parallel()
	s := openTest(t)
	rows, err := s.r.QueryContext(t.Context(), `SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'messages'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	seen := 0
	for rows.Next() {
		var name, body string
		if err := rows.Scan(&name, &body); err != nil {
			t.Fatal(err)
		}
		head := strings.ToUpper(body[:strings.Index(strings.ToUpper(body), " ON MESSAGES")])
		if !strings.Contains(head, "UPDATE") {
			continue
		}
		seen++
		if strings.Contains(strings.ToUpper(body), "ON CONFLICT") {
			t.Errorf("trigger %s holds an upsert:\n%s", name, body)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if seen < 3 { // messages_status_moved, messages_waiting_left, messages_waiting_joined at least
		t.Errorf("%d triggers on UPDATE of messages, want at least 3", seen)
	}
}

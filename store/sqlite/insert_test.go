package sqlite

import (
	"database/sql"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/migrate"
)

// purgeMsg is a message of key key with the given flags.
func purgeMsg(key string, flags ...string) *quarantine.Message {
	return &quarantine.Message{Source: "src", SourceKind: quarantine.SourceMemory, Queue: "q", JobName: "job",
		IdempotencyKey: key, DedupeKey: key, FailureClass: quarantine.ClassPermanent, Reason: "boom",
		Payload: []byte(`{"a":1}`), FailedAt: time.Date(2025, 7, 1, 0, 0, 0, 0, time.UTC), Flags: flags}
}

// purgedColumn returns payload_purged of each message, by ID.
func purgedColumn(t *testing.T, s *Store) map[string]int {
	t.Helper()
	rows, err := s.r.QueryContext(t.Context(), `SELECT id, payload_purged FROM messages`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var id string
		var v int
		if err := rows.Scan(&id, &v); err != nil {
			t.Fatal(err)
		}
		out[id] = v
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPurgeColumnMigration checks that migration 0012 sets
// payload_purged on exactly the messages whose flags hold payload_purged,
// and that InsertBatch sets it from the flags.
func TestPurgeColumnMigration(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "q.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	err = migrate.Apply(ctx, ms[:11], func(name string, fn func(migrate.Tx) error) error {
		return s.write(ctx, name, func(tx *sql.Tx) error { return fn(migrationTx{tx, s.clock}) })
	})
	if err != nil {
		t.Fatal(err)
	}
	// Two messages as InsertBatch stored them before 0012 (no
	// payload_purged column).
	old := map[string]*quarantine.Message{"purged": purgeMsg("purged", quarantine.FlagMalformed, quarantine.FlagPayloadPurged), "kept": purgeMsg("kept", quarantine.FlagMalformed)}
	cols := strings.TrimSuffix(messageInsertColumns, ",\n\tpayload_purged")
	for _, m := range old {
		r, err := prepareRow(m, s.clock())
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.w.ExecContext(ctx, `INSERT INTO messages (`+cols+`) VALUES (?`+strings.Repeat(", ?", messageArgs-2)+`)`,
			m.ID, m.Source, string(m.SourceKind), m.Queue, m.JobName, m.MessageID, m.IdempotencyKey, m.SchemaVersion,
			m.Attempts, string(m.FailureClass), m.Reason, m.PayloadSize, m.ContentType, m.PayloadSHA256, m.PayloadVersion,
			r.headers, microsPtr(m.EnqueuedAt), microsPtr(m.FirstFailedAt), micros(m.FailedAt), micros(m.CollectedAt),
			micros(m.UpdatedAt), string(m.Status), m.Owner, m.Fingerprint, m.ReplayCount, m.RefailOf, r.flags, m.DedupeKey,
			r.rank, m.KeyRule)
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	got := purgedColumn(t, s)
	if got[old["purged"].ID] != 1 || got[old["kept"].ID] != 0 {
		t.Fatalf("after 0012: payload_purged %v, want 1 for %s and 0 for %s", got, old["purged"].ID, old["kept"].ID)
	}

	fresh := []*quarantine.Message{purgeMsg("new-purged", quarantine.FlagPayloadPurged), purgeMsg("new-kept")}
	if _, err := s.InsertBatch(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	got = purgedColumn(t, s)
	if got[fresh[0].ID] != 1 || got[fresh[1].ID] != 0 {
		t.Fatalf("inserted: payload_purged %v, want 1 for %s and 0 for %s", got, fresh[0].ID, fresh[1].ID)
	}
}

// TestMessageIndexConditionsCallNoFunction checks that no partial index
// of messages has a function (or LIKE, GLOB, REGEXP, MATCH, which are
// functions) in its condition: SQLite would then run each INSERT of
// several messages under a statement journal (see insertStatement).
func TestMessageIndexConditionsCallNoFunction(t *testing.T) {
	t.Parallel()
	s := openTest(t)
	rows, err := s.r.QueryContext(t.Context(), `SELECT name, sql FROM sqlite_master
		WHERE type = 'index' AND tbl_name = 'messages' AND sql IS NOT NULL`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	in := regexp.MustCompile(`\bIN\s*\(`) // a list, not a call
	call := regexp.MustCompile(`\w\s*\(|\b(LIKE|GLOB|REGEXP|MATCH)\b`)
	partial := 0
	for rows.Next() {
		var name, def string
		if err := rows.Scan(&name, &def); err != nil {
			t.Fatal(err)
		}
		_, where, ok := strings.Cut(strings.ToUpper(def), " WHERE ")
		if !ok {
			continue
		}
		partial++
		where = in.ReplaceAllString(where, "IN [")
		if call.MatchString(where) {
			t.Errorf("index %s: its condition %q calls a function", name, where)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if partial == 0 {
		t.Fatal("no partial index of messages found: the check checked nothing")
	}
}

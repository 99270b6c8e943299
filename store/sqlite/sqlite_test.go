package sqlite

import (
	"database/sql"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// openTest opens and migrates a store in a fresh temporary directory.
func openTest(t testing.TB, opts ...Option) *Store {
	t.Helper()
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "sub", "q.db"), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return s
}

// execRaw runs sql on the writer with the append-only triggers of
// audit_log dropped for the duration, in one transaction.
func execRaw(t *testing.T, s *Store, q string) {
	t.Helper()
	err := s.write(t.Context(), "tamper", func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(t.Context(), `SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'audit_log'`)
		if err != nil {
			return err
		}
		var names, defs []string
		for rows.Next() {
			var n, d string
			if err := rows.Scan(&n, &d); err != nil {
				return err
			}
			names, defs = append(names, n), append(defs, d)
		}
		if err := rows.Close(); err != nil {
			return err
		}
		for _, n := range names {
			if _, err := tx.ExecContext(t.Context(), `DROP TRIGGER "`+n+`"`); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(t.Context(), q); err != nil {
			return err
		}
		for _, d := range defs {
			if _, err := tx.ExecContext(t.Context(), d); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("exec %q: %v", q, err)
	}
}

func TestAuditLogIsAppendOnly(t *testing.T) {
	t.Parallel()
	s := openTest(t)
	if _, err := s.AppendAudit(t.Context(), quarantine.NewAuditEvent("alice", "x", "y", nil)); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"UPDATE audit_log SET actor = 'mallory'", "DELETE FROM audit_log"} {
		_, err := s.w.ExecContext(t.Context(), q)
		if err == nil {
			t.Fatalf("%s succeeded on an append-only log", q)
		}
	}
	v, err := s.VerifyAudit(t.Context())
	if err != nil || !v.OK || v.Checked != 1 {
		t.Fatalf("VerifyAudit = %+v, %v", v, err)
	}
}

func TestOpenCreatesDirectoriesAndDoesNotMigrate(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "a b", "50% c?d#e", "q.db")
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the database file is not at the path given: %v", err)
	}
	cur, latest, err := s.SchemaVersion(t.Context())
	if err != nil || cur != 0 || latest < 1 {
		t.Fatalf("SchemaVersion before Migrate = %d/%d, %v; want 0 of at least 1", cur, latest, err)
	}
	var mode string
	if err := s.w.QueryRowContext(t.Context(), "PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q, %v; want wal", mode, err)
	}
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.r.ExecContext(t.Context(), "CREATE TABLE x (y)"); err == nil {
		t.Fatal("a read connection could write")
	}
}

func TestWithClock(t *testing.T) {
	t.Parallel()
	at := time.Date(2030, 1, 2, 3, 4, 5, 678901234, time.UTC)
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "q.db"), WithClock(func() time.Time { return at }))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	m := &quarantine.Message{Source: "s", Queue: "q", Payload: []byte("p")}
	if _, err := s.InsertBatch(t.Context(), []*quarantine.Message{m}); err != nil {
		t.Fatal(err)
	}
	e, err := s.AppendAudit(t.Context(), quarantine.NewAuditEvent("alice", "x", "y", nil))
	if err != nil {
		t.Fatal(err)
	}
	want := at.Truncate(time.Microsecond)
	got, err := s.GetMessage(t.Context(), m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !got.CollectedAt.Equal(want) || !got.FailedAt.Equal(want) || !e.Time.Equal(want) {
		t.Fatalf("collected %v failed %v audit %v, want the injected clock %v", got.CollectedAt, got.FailedAt, e.Time, want)
	}
}

// TestTwoProcessesShareTheFile has two stores (as serve and a CLI command
// would) write the same file at once: the lock waits must not surface.
func TestTwoProcessesShareTheFile(t *testing.T) {
	t.Parallel()
	a := openTest(t)
	b, err := Open(t.Context(), a.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 80)
	for i := range 4 {
		for _, s := range []*Store{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := range 10 {
					if _, err := s.AppendAudit(t.Context(), quarantine.NewAuditEvent("w", "x", "y", map[string]int{"i": i, "j": j})); err != nil {
						errs <- err
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	v, err := b.VerifyAudit(t.Context())
	if err != nil || !v.OK || v.Checked != 80 {
		t.Fatalf("VerifyAudit = %+v, %v; want 80 events verified", v, err)
	}
}

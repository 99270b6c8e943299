package postgres_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/quarantine-dev/quarantine"
)

// TestAuditLogRefusesChanges checks that the trigger refuses every way of
// changing or removing audit rows, even one that would touch no row, and
// that the chain still verifies afterwards.
func TestAuditLogRefusesChanges(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	for range 3 {
		if _, err := s.AppendAudit(t.Context(), quarantine.NewAuditEvent("alice", "x", "y", nil)); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct{ op, sql string }{
		{"UPDATE", "UPDATE audit_log SET actor = 'mallory' WHERE seq = 2"},
		{"UPDATE", "UPDATE audit_log SET actor = 'mallory' WHERE false"},
		{"DELETE", "DELETE FROM audit_log WHERE seq = 3"},
		{"DELETE", "DELETE FROM audit_log"},
		{"TRUNCATE", "TRUNCATE audit_log"},
	}
	for _, c := range cases {
		_, err := s.Pool().Exec(t.Context(), c.sql)
		pe, ok := err.(*pgconn.PgError)
		if !ok || !strings.Contains(pe.Message, "audit_log is append-only: "+c.op+" is refused") {
			t.Errorf("%s: err = %v, want the append-only refusal", c.sql, err)
		}
	}
	v, err := s.VerifyAudit(t.Context())
	if err != nil || !v.OK || v.Checked != 3 {
		t.Fatalf("VerifyAudit = %+v, %v; want 3 events, OK", v, err)
	}
}

// TestAuditConcurrentAppends appends from many goroutines at once: the
// head lock gives one gapless chain that verifies.
func TestAuditConcurrentAppends(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	const workers, each = 8, 10
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Go(func() {
			for range each {
				_, err := s.AppendAudit(t.Context(), quarantine.NewAuditEvent("w", "x", string(rune('a'+w)), nil))
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("AppendAudit: %v", err)
		}
	}
	v, err := s.VerifyAudit(t.Context())
	if err != nil || !v.OK || v.Checked != workers*each || v.Head.Seq != workers*each {
		t.Fatalf("VerifyAudit = %+v, %v; want %d events, OK", v, err, workers*each)
	}
}

// TestAuditTimeRoundTrips checks that microseconds survive timestamptz.
func TestAuditTimeRoundTrips(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	e, err := s.AppendAudit(t.Context(), quarantine.NewAuditEvent("alice", "x", "y", map[string]any{"b": 1, "a": "é<>"}))
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.ListAudit(t.Context(), quarantine.AuditFilter{})
	if err != nil || len(got) != 1 {
		t.Fatalf("ListAudit = %v, %v", got, err)
	}
	g := got[0]
	if !g.Time.Equal(e.Time) || g.Hash != e.Hash || string(g.Details) != string(e.Details) {
		t.Fatalf("stored %+v, appended %+v", g, e)
	}
	if h, _ := g.ComputeHash(); h != g.Hash {
		t.Fatal("the stored event no longer hashes to its hash")
	}
}

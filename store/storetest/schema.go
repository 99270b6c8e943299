package storetest

import "testing"

func testSchema(t *testing.T, h Harness) {
	s := h.Open(t)
	ctx := t.Context()
	wantOK(t, s.Ping(ctx), "Ping")
	cur, latest, err := s.SchemaVersion(ctx)
	wantOK(t, err, "SchemaVersion")
	if latest < 1 || cur != latest {
		t.Fatalf("SchemaVersion after migrate = %d of %d, want current == latest >= 1", cur, latest)
	}
	m := newMsg()
	insert(t, s, m)
	evs := seedAudit(t, s, 2)
	for range 2 {
		wantOK(t, s.Migrate(ctx), "Migrate again")
	}
	cur2, latest2, err := s.SchemaVersion(ctx)
	wantOK(t, err, "SchemaVersion")
	if cur2 != cur || latest2 != latest {
		t.Fatalf("Migrate twice changed the version: %d/%d -> %d/%d", cur, latest, cur2, latest2)
	}
	got, err := s.GetMessage(ctx, m.ID)
	wantOK(t, err, "GetMessage after Migrate")
	wantSame(t, m, got, true)
	head, err := s.AuditHead(ctx)
	wantOK(t, err, "AuditHead")
	if head != headOf(evs[1]) {
		t.Fatalf("Migrate again moved the audit head to %+v", head)
	}
	v, err := s.VerifyAudit(ctx)
	wantOK(t, err, "VerifyAudit")
	if !v.OK || v.Checked != 2 {
		t.Fatalf("VerifyAudit after Migrate again = %+v", v)
	}
	if n, err := s.CountActiveTokens(ctx); err != nil || n != 0 {
		t.Fatalf("CountActiveTokens = %d, %v", n, err)
	}
}

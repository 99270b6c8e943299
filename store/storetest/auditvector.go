package storetest

import (
	"testing"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/auditvector"
)

// testAuditKnownAnswers appends the known-answer chain through the store,
// its clock set to each event's time: the store seals, stores and reads
// back exactly the hashes an independent implementation computed, and
// the head and the verification agree.
func testAuditKnownAnswers(t *testing.T, h Harness) {
	s, clock := openClock(t, h)
	ctx := t.Context()
	vs := auditvector.Events()
	for _, v := range vs {
		clock.Advance(v.Time.Sub(clock.Now()))
		got, err := s.AppendAudit(ctx, quarantine.NewAuditEvent(v.Actor, v.Action, v.Subject, v.Details))
		wantOK(t, err, "AppendAudit")
		if got.Seq != v.Seq || got.PrevHash != v.PrevHash || got.Hash != v.Hash {
			t.Fatalf("event %d stored as seq %d, prev %s, hash %s; want prev %s, hash %s",
				v.Seq, got.Seq, got.PrevHash, got.Hash, v.PrevHash, v.Hash)
		}
	}
	stored, err := s.ListAudit(ctx, quarantine.AuditFilter{})
	wantOK(t, err, "ListAudit")
	if len(stored) != len(vs) {
		t.Fatalf("%d events stored, want %d", len(stored), len(vs))
	}
	for i, e := range stored {
		if e.Hash != vs[i].Hash || !e.Time.Equal(vs[i].Time) {
			t.Fatalf("event %d read back with hash %s at %s", e.Seq, e.Hash, e.Time)
		}
	}
	head, err := s.AuditHead(ctx)
	wantOK(t, err, "AuditHead")
	last := vs[len(vs)-1]
	if head.Seq != last.Seq || head.Hash != last.Hash {
		t.Fatalf("head %+v, want seq %d hash %s", head, last.Seq, last.Hash)
	}
	r, err := s.VerifyAudit(ctx, quarantine.AuditHead{Seq: last.Seq, Hash: last.Hash})
	wantOK(t, err, "VerifyAudit")
	if !r.OK {
		t.Fatalf("the known-answer chain does not verify in the store: %+v", r)
	}
}

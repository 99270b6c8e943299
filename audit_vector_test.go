package quarantine_test

import (
	"strings"
	"testing"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/auditvector"
)

// The chain's canonical form and hashes match the known answers computed
// by an independent implementation; a tampered event is found.
func TestAuditKnownAnswers(t *testing.T) {
	t.Parallel()
	var chain []quarantine.AuditEvent
	for _, v := range auditvector.Events() {
		e := quarantine.AuditEvent{Seq: v.Seq, Time: v.Time, Actor: v.Actor, Action: v.Action, Subject: v.Subject,
			Details: v.Details, PrevHash: v.PrevHash}
		c, err := e.CanonicalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if string(c) != v.Canonical {
			t.Fatalf("event %d canonical form\n got %s\nwant %s", v.Seq, c, v.Canonical)
		}
		h, err := e.ComputeHash()
		if err != nil || h != v.Hash {
			t.Fatalf("event %d hash %s (%v), want %s", v.Seq, h, err, v.Hash)
		}
		// Sealing after the previous head gives the same event.
		s := quarantine.NewAuditEvent(v.Actor, v.Action, v.Subject, v.Details)
		if err := s.Seal(quarantine.AuditHead{Seq: v.Seq - 1, Hash: v.PrevHash}, v.Time); err != nil || s.Hash != v.Hash {
			t.Fatalf("event %d sealed to %s (%v), want %s", v.Seq, s.Hash, err, v.Hash)
		}
		e.Hash = h
		chain = append(chain, e)
	}
	if r := quarantine.VerifyChain(chain); !r.OK || r.Checked != int64(len(chain)) {
		t.Fatalf("the vector does not verify: %+v", r)
	}
	chain[1].Actor = "token:mallory"
	if r := quarantine.VerifyChain(chain); r.OK || r.FirstBadSeq != 2 {
		t.Fatalf("a tampered actor was not found at seq 2: %+v", r)
	}
}

// Details that cannot be encoded are recorded as such, not as {}.
func TestAuditDetailsNotLostSilently(t *testing.T) {
	t.Parallel()
	e := quarantine.NewAuditEvent("a", "x", "s", map[string]any{"bad": make(chan int)})
	if !strings.Contains(string(e.Details), `"details_error"`) || !strings.Contains(string(e.Details), "map[string]interface {}") {
		t.Fatalf("details %s", e.Details)
	}
}

package storetest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/quarantine-dev/quarantine"
)

// tamperEvents is how many events each tamper case starts with.
const tamperEvents = 6

// testAuditTamper alters the stored log behind the store's back with
// dialect-neutral SQL and checks that VerifyAudit reports the exact first
// bad sequence number. Times are only ever copied with SELECT: each store
// keeps them in its own column type.
func testAuditTamper(t *testing.T, h Harness) {
	// stmts is a tamper by fixed statements.
	stmts := func(q ...string) func([]quarantine.AuditEvent) []string {
		return func([]quarantine.AuditEvent) []string { return q }
	}
	cases := []struct {
		name    string
		tamper  func(evs []quarantine.AuditEvent) []string // the statements, run in order, given the seeded events
		wantBad int64
	}{
		{"ChangedField", stmts("UPDATE audit_log SET actor = 'mallory' WHERE seq = 3"), 3},
		{"ChangedDetails", stmts("UPDATE audit_log SET details = (SELECT details FROM audit_log WHERE seq = 1) WHERE seq = 4"), 4},
		{"DeletedMiddle", stmts("DELETE FROM audit_log WHERE seq = 3"), 3},
		{"DeletedFirst", stmts("DELETE FROM audit_log WHERE seq = 1"), 1},
		{"SwappedRows", stmts(
			"UPDATE audit_log SET seq = -1 WHERE seq = 3",
			"UPDATE audit_log SET seq = 3 WHERE seq = 4",
			"UPDATE audit_log SET seq = 4 WHERE seq = -1"), 3},
		{"ForgedRowWrongHash", stmts(fmt.Sprintf(`INSERT INTO audit_log (seq, time, actor, action, subject, details, prev_hash, hash)
			SELECT seq + 1, time, 'mallory', action, subject, details, hash, '%s' FROM audit_log WHERE seq = %d`,
			strings.Repeat("ab", 32), tamperEvents)), tamperEvents + 1},
		{"FlippedHashDigit", func(evs []quarantine.AuditEvent) []string {
			return []string{fmt.Sprintf("UPDATE audit_log SET hash = '%s' WHERE seq = 4", flipDigit(evs[3].Hash, 17))}
		}, 4},
		{"FlippedPrevHashDigit", func(evs []quarantine.AuditEvent) []string {
			return []string{fmt.Sprintf("UPDATE audit_log SET prev_hash = '%s' WHERE seq = 5", flipDigit(evs[4].PrevHash, 63))}
		}, 5},
		{"TruncatedTail", stmts("DELETE FROM audit_log WHERE seq > 4"), 5},
		{"TruncatedToEmpty", stmts("DELETE FROM audit_log"), 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := h.Open(t)
			for _, q := range c.tamper(seedAudit(t, s, tamperEvents)) {
				h.Exec(t, s, q)
			}
			v, err := s.VerifyAudit(t.Context())
			wantOK(t, err, "VerifyAudit")
			if v.OK || v.FirstBadSeq != c.wantBad || v.Problem == "" {
				t.Fatalf("VerifyAudit = %+v, want not OK with first bad seq %d", v, c.wantBad)
			}
		})
	}

	// A forged last row with the right hash: the chain is self-consistent,
	// and only the kept head exposes it.
	t.Run("ForgedRowRightHash", func(t *testing.T) {
		t.Parallel()
		s := h.Open(t)
		evs := seedAudit(t, s, tamperEvents)
		last := evs[len(evs)-1]
		forged := quarantine.AuditEvent{Actor: "mallory", Action: last.Action, Subject: last.Subject, Details: last.Details}
		if err := forged.Seal(headOf(last), last.Time); err != nil {
			t.Fatal(err)
		}
		h.Exec(t, s, fmt.Sprintf(`INSERT INTO audit_log (seq, time, actor, action, subject, details, prev_hash, hash)
			SELECT %d, time, 'mallory', action, subject, details, hash, '%s' FROM audit_log WHERE seq = %d`,
			forged.Seq, forged.Hash, last.Seq))
		all, err := s.ListAudit(t.Context(), quarantine.AuditFilter{})
		wantOK(t, err, "ListAudit")
		if v := quarantine.VerifyChain(all); !v.OK || v.Checked != tamperEvents+1 {
			t.Fatalf("the forged row should carry a right hash, yet the chain alone gives %+v", v)
		}
		v, err := s.VerifyAudit(t.Context())
		wantOK(t, err, "VerifyAudit")
		if v.OK || v.FirstBadSeq != tamperEvents+1 || v.Problem == "" {
			t.Fatalf("VerifyAudit = %+v, want not OK with first bad seq %d", v, tamperEvents+1)
		}
	})

	// The attacker cuts the tail and moves the kept head back too: the log
	// is consistent with itself, and only a head reported earlier (by a
	// monitor, a receipt, a previous verification) shows the loss.
	t.Run("TruncatedTailAndHead", func(t *testing.T) {
		t.Parallel()
		s := h.Open(t)
		evs := seedAudit(t, s, tamperEvents)
		reported, err := s.AuditHead(t.Context())
		wantOK(t, err, "AuditHead")
		h.Exec(t, s, "DELETE FROM audit_log WHERE seq > 4")
		v, err := s.VerifyAudit(t.Context())
		wantOK(t, err, "VerifyAudit")
		if v.OK || v.FirstBadSeq != 5 {
			t.Fatalf("tail cut, head kept: %+v, want bad at 5", v)
		}
		h.Exec(t, s, fmt.Sprintf("UPDATE audit_head SET seq = 4, hash = '%s' WHERE id = 1", evs[3].Hash))
		v, err = s.VerifyAudit(t.Context())
		wantOK(t, err, "VerifyAudit")
		if !v.OK || v.Head != headOf(evs[3]) {
			t.Fatalf("after resetting the head the log alone looks whole: %+v", v)
		}
		v, err = s.VerifyAudit(t.Context(), reported)
		wantOK(t, err, "VerifyAudit with the reported head")
		if v.OK || v.FirstBadSeq != 5 {
			t.Fatalf("with the head reported earlier: %+v, want bad at 5", v)
		}
		// The store keeps appending after its (reset) head; the reported
		// head still does not match what now sits at its seq.
		_, err = s.AppendAudit(t.Context(), quarantine.NewAuditEvent("alice", "x", "y", nil))
		wantOK(t, err, "AppendAudit")
		_, err = s.AppendAudit(t.Context(), quarantine.NewAuditEvent("alice", "x", "y", nil))
		wantOK(t, err, "AppendAudit")
		v, err = s.VerifyAudit(t.Context(), reported)
		wantOK(t, err, "VerifyAudit")
		if v.OK || v.FirstBadSeq != reported.Seq {
			t.Fatalf("rewritten tail: %+v, want bad at %d", v, reported.Seq)
		}
	})
}

// flipDigit changes the hex digit at i.
func flipDigit(h string, i int) string {
	b := []byte(h)
	if b[i] == '0' {
		b[i] = '1'
	} else {
		b[i] = '0'
	}
	return string(b)
}

package storetest

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/quarantine-dev/quarantine"
)

// RekeyMessages sets key, rule and flags of the messages whose key and
// rule did not change meanwhile, one audited event each, and leaves the
// others (and every other field) alone.
func testRekey(t *testing.T, h Harness) {
	s := h.Open(t)
	missing := func(m *quarantine.Message) { m.IdempotencyKey, m.KeyRule = "", quarantine.KeyRuleNone }
	a, b, c := newMsg(missing), newMsg(missing), newMsg()
	insert(t, s, a, b, c)
	got, err := s.GetMessage(t.Context(), a.ID)
	wantOK(t, err, "GetMessage")
	if !got.HasFlag(quarantine.FlagMissingIdempotencyKey) {
		t.Fatalf("fixture without a key has flags %v", got.Flags)
	}
	rule := "header:x-job-key"
	changes := []quarantine.KeyChange{
		{ID: a.ID, Queue: a.Queue, OldRule: quarantine.KeyRuleDefault, NewKey: "ka", NewRule: rule}, // none reads as default
		{ID: b.ID, Queue: b.Queue, OldKey: "not-its-key", OldRule: quarantine.KeyRuleNone, NewKey: "kb", NewRule: rule},
		{ID: quarantine.NewID(baseTime), NewKey: "kx", NewRule: rule},
	}
	_, err = s.RekeyMessages(t.Context(), quarantine.Rekey{Changes: changes, Actor: "bob"})
	wantCode(t, err, quarantine.EUNPROCESSABLE)
	_, err = s.RekeyMessages(t.Context(), quarantine.Rekey{Changes: []quarantine.KeyChange{{ID: c.ID, OldKey: c.IdempotencyKey, OldRule: c.KeyRule}}, Actor: "bob", Reason: "r"})
	wantCode(t, err, quarantine.EINVALID)

	done, err := s.RekeyMessages(t.Context(), quarantine.Rekey{Changes: changes, Actor: "bob", Reason: "INC-9 rule"})
	wantOK(t, err, "RekeyMessages")
	if !slices.Equal(done, []string{a.ID}) {
		t.Fatalf("changed %v, want only %s (b is stale, the third unknown)", done, a.ID)
	}
	got, err = s.GetMessage(t.Context(), a.ID)
	wantOK(t, err, "GetMessage")
	if got.IdempotencyKey != "ka" || got.KeyRule != rule || got.HasFlag(quarantine.FlagMissingIdempotencyKey) ||
		got.PayloadSHA256 != a.PayloadSHA256 || got.Status != quarantine.StatusQuarantined {
		t.Fatalf("re-keyed message: key %q rule %q flags %v", got.IdempotencyKey, got.KeyRule, got.Flags)
	}
	gotB, err := s.GetMessage(t.Context(), b.ID)
	wantOK(t, err, "GetMessage")
	if gotB.IdempotencyKey != "" || !gotB.HasFlag(quarantine.FlagMissingIdempotencyKey) {
		t.Fatalf("stale change applied: key %q flags %v", gotB.IdempotencyKey, gotB.Flags)
	}
	page, err := s.ListMessages(t.Context(), quarantine.Filter{IdempotencyKey: []string{"ka"}, Limit: 10})
	wantOK(t, err, "ListMessages")
	if len(page.Messages) != 1 || page.Messages[0].ID != a.ID {
		t.Fatalf("the new key does not find the message: %d", len(page.Messages))
	}
	evs, err := s.ListAudit(t.Context(), quarantine.AuditFilter{Action: quarantine.ActionRekey, Limit: 10})
	wantOK(t, err, "ListAudit")
	var d map[string]string
	if len(evs) != 1 || evs[0].Subject != a.ID || evs[0].Actor != "bob" || json.Unmarshal(evs[0].Details, &d) != nil ||
		d["old_key"] != "" || d["new_key"] != "ka" || d["new_rule"] != rule || d["reason"] != "INC-9 rule" {
		t.Fatalf("audit %+v", evs)
	}
	v, err := s.VerifyAudit(t.Context())
	if err != nil || !v.OK {
		t.Fatalf("VerifyAudit = %+v, %v", v, err)
	}
}

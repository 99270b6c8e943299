package quarantine_test

import (
	"testing"

	"github.com/quarantine-dev/quarantine"
)

func TestStatusTransitions(t *testing.T) {
	t.Parallel()
	allowed := map[[2]quarantine.Status]bool{
		{"quarantined", "replaying"}: true,
		{"quarantined", "discarded"}: true,
		{"replaying", "replayed"}:    true,
		{"replaying", "quarantined"}: true,
		{"replaying", "refailed"}:    true, // came back before its publish was recorded
		{"replayed", "refailed"}:     true,
		{"replayed", "discarded"}:    true,
		{"refailed", "discarded"}:    true,
	}
	for _, from := range quarantine.Statuses {
		for _, to := range quarantine.Statuses {
			want := allowed[[2]quarantine.Status{from, to}]
			if got := from.CanBecome(to); got != want {
				t.Errorf("%s -> %s: got %v, want %v", from, to, got, want)
			}
			err := from.Transition(to)
			if want != (err == nil) {
				t.Errorf("%s -> %s: Transition error %v", from, to, err)
			}
			if err != nil && quarantine.ErrorCode(err) != quarantine.ECONFLICT {
				t.Errorf("%s -> %s: code %s", from, to, quarantine.ErrorCode(err))
			}
		}
	}
	if err := quarantine.StatusQuarantined.Transition("gone"); quarantine.ErrorCode(err) != quarantine.EINVALID {
		t.Errorf("unknown target: %v", err)
	}
}

func TestParseEnums(t *testing.T) {
	t.Parallel()
	for _, s := range quarantine.Statuses {
		if got, err := quarantine.ParseStatus(string(s)); err != nil || got != s {
			t.Errorf("ParseStatus(%q) = %q, %v", s, got, err)
		}
	}
	for _, c := range quarantine.FailureClasses {
		if got, err := quarantine.ParseFailureClass(string(c)); err != nil || got != c {
			t.Errorf("ParseFailureClass(%q) = %q, %v", c, got, err)
		}
	}
	for _, bad := range []string{"", "QUARANTINED", "x' OR 1=1 --", "\xff"} {
		if _, err := quarantine.ParseStatus(bad); quarantine.ErrorField(err) != "status" {
			t.Errorf("ParseStatus(%q): %v", bad, err)
		}
		if _, err := quarantine.ParseFailureClass(bad); quarantine.ErrorField(err) != "failure_class" {
			t.Errorf("ParseFailureClass(%q): %v", bad, err)
		}
		if _, err := quarantine.ParseRole(bad); quarantine.ErrorField(err) != "role" {
			t.Errorf("ParseRole(%q): %v", bad, err)
		}
	}
}

func TestRoles(t *testing.T) {
	t.Parallel()
	if !quarantine.RoleAdmin.AtLeast(quarantine.RoleOperator) || quarantine.RoleViewer.AtLeast(quarantine.RoleOperator) ||
		!quarantine.RoleOperator.AtLeast(quarantine.RoleOperator) || quarantine.Role("root").AtLeast(quarantine.RoleViewer) {
		t.Fatal("role order is wrong")
	}
	tok := quarantine.Token{Name: "t", Role: quarantine.RoleViewer, Owners: []string{"payments"}}
	if !tok.Sees("payments") || tok.Sees("billing") || tok.Sees("") {
		t.Fatal("owner scope is wrong")
	}
	global := quarantine.Token{Name: "g", Role: quarantine.RoleViewer}
	if !global.Sees("anything") || !global.Sees("") {
		t.Fatal("a token without owners sees everything")
	}
	s1, h1 := quarantine.NewTokenSecret()
	s2, _ := quarantine.NewTokenSecret()
	if s1 == s2 || quarantine.HashTokenSecret(s1) != h1 || len(s1) < 40 || s1[:3] != quarantine.TokenPrefix {
		t.Fatalf("secrets: %q %q", s1, s2)
	}
}

// TestInternalDetailsHidden: an internal error's cause is never its
// message. (The code-to-status table is rules.ErrorStatus.)
func TestInternalDetailsHidden(t *testing.T) {
	t.Parallel()
	wrapped := quarantine.Internal(errSecret{}, "store failed")
	if quarantine.ErrorMessage(wrapped) != "internal error" || quarantine.ErrorCode(errSecret{}) != quarantine.EINTERNAL {
		t.Fatal("internal details leak")
	}
}

type errSecret struct{}

func (errSecret) Error() string { return "password=hunter2" }

func TestDiscardPlan(t *testing.T) {
	t.Parallel()
	sel := []quarantine.Selected{
		{ID: "a", Status: quarantine.StatusQuarantined, Found: true},
		{ID: "b", Status: quarantine.StatusDiscarded, Found: true},
		{ID: "c", Status: quarantine.StatusReplaying, Found: true},
		{ID: "d"},
	}
	d := quarantine.Discard{Reason: "bad data", Actor: "token:ops"}
	res, events, err := d.Plan(sel)
	if err != nil || res.Matched != 3 || len(res.Changed) != 1 || res.Changed[0] != "a" || len(res.Skipped) != 3 {
		t.Fatalf("plan: %+v %v", res, err)
	}
	reasons := map[string]string{}
	for _, s := range res.Skipped {
		reasons[s.ID] = s.Reason
	}
	if reasons["b"] != "already discarded" || reasons["d"] != "not found" || reasons["c"] == "" {
		t.Fatalf("skip reasons %v", reasons)
	}
	// The change, and the refusal of the message a replay holds (the
	// loser of a race is recorded too); not the already discarded one.
	if len(events) != 2 || events[0].Subject != "a" || events[0].Action != quarantine.ActionDiscard || events[0].Actor != "token:ops" ||
		events[1].Subject != "c" || events[1].Action != quarantine.ActionDiscardRefused {
		t.Fatalf("events %+v", events)
	}
	three, two := 3, 2
	d.ExpectCount = &three
	if _, _, err := d.Plan(sel); err != nil {
		t.Fatalf("matching count refused: %v", err)
	}
	d.ExpectCount = &two
	if _, ev, err := d.Plan(sel); quarantine.ErrorCode(err) != quarantine.ECONFLICT || quarantine.ErrorField(err) != "expect_count" || ev != nil {
		t.Fatalf("pinned count: %v %v", ev, err)
	}
}

func TestEditable(t *testing.T) {
	t.Parallel()
	for _, s := range quarantine.Statuses {
		err := s.Editable()
		blocked := s == quarantine.StatusReplaying || s == quarantine.StatusDiscarded
		if blocked != (quarantine.ErrorCode(err) == quarantine.ECONFLICT) || !blocked && err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
}

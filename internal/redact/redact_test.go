package redact_test

import (
	"testing"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/redact"
)

func TestRedactForRoles(t *testing.T) {
	t.Parallel()
	payload := []byte(`{"card":{"number":"4111","cvc":"1"},"items":[{"s":"a"},{"s":"b"}],"a/b":2,"h":"<b>"}`)
	ptrs := []string{"/card/number", "/items/1/s", "/a~1b", "/missing"}
	viewer := &quarantine.Token{Role: quarantine.RoleViewer}
	got, masked := redact.For(viewer, ptrs, payload)
	want := `{"a/b":"<redacted>","card":{"cvc":"1","number":"<redacted>"},"h":"<b>","items":[{"s":"a"},{"s":"<redacted>"}]}`
	if !masked || string(got) != want {
		t.Fatalf("viewer sees %s (masked %v), want %s", got, masked, want)
	}
	for _, r := range []quarantine.Role{quarantine.RoleOperator, quarantine.RoleAdmin} {
		if got, masked := redact.For(&quarantine.Token{Role: r}, ptrs, payload); masked || string(got) != string(payload) {
			t.Fatalf("%s sees %s", r, got)
		}
	}
	// "01" is no array index (RFC 6901), as for idempotency rules.
	if got, masked := redact.For(viewer, []string{"/items/01/s"}, payload); masked || string(got) != string(payload) {
		t.Fatalf("/items/01/s masked %s", got)
	}
	for _, p := range [][]byte{[]byte(`not json`), []byte(`{"x":1} {"card":{"number":"1"}}`), []byte(`{"other":1}`)} {
		if got, masked := redact.For(viewer, ptrs, p); masked || string(got) != string(p) {
			t.Fatalf("%s: %s masked=%v, want unchanged", p, got, masked)
		}
	}
	if got, masked := redact.For(viewer, nil, payload); masked || string(got) != string(payload) {
		t.Fatal("no pointers: unchanged")
	}
}

func TestRedactSearchDenied(t *testing.T) {
	t.Parallel()
	viewer := &quarantine.Token{Role: quarantine.RoleViewer}
	op := &quarantine.Token{Role: quarantine.RoleOperator}
	for _, c := range []struct {
		t     *quarantine.Token
		ptrs  []string
		text  string
		wantD bool
	}{
		{viewer, []string{"/a"}, "x", true}, {viewer, nil, "x", false}, {viewer, []string{"/a"}, "", false},
		{op, []string{"/a"}, "x", false},
	} {
		if got := redact.SearchDenied(c.t, c.ptrs, c.text); got != c.wantD {
			t.Errorf("SearchDenied(%s, %v, %q) = %v", c.t.Role, c.ptrs, c.text, got)
		}
	}
}

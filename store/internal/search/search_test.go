package search

import (
	"strings"
	"testing"
)

func TestFold(t *testing.T) {
	t.Parallel()
	cases := []struct{ a, b string }{
		{"überlauf", "ÜBERLAUF"},
		{"Straße", "STRASSE"},
		{"λάθος", "ΛΆΘΟΣ"},
		{"ошибка", "ОШИБКА"},
		{"kelvin", "\u212Aelvin"},
		{"Upstream Timeout", "upstream timeout"},
	}
	for _, c := range cases {
		if Fold(c.a) != Fold(c.b) {
			t.Errorf("Fold(%q) = %q, Fold(%q) = %q: want equal", c.a, Fold(c.a), c.b, Fold(c.b))
		}
	}
	// The ASCII fast path agrees with the general one.
	for _, s := range []string{"Hello WORLD 42 ~!@", "a\x1fb"} {
		if got, want := Fold(s), Fold(s+"é"); got+"é" != want {
			t.Errorf("fast path %q: %q vs %q", s, got, want)
		}
	}
	if strings.Contains(Fold("a"+Sep+"B"), Sep) {
		t.Error("Fold keeps the separator")
	}
	if Indexed("ab") || !Indexed("abc") || !Indexed("λάθ") || Indexed("λά") {
		t.Error("Indexed counts bytes, not runes")
	}
}

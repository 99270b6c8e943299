package defaults

import (
	"testing"
	"time"
)

func TestPositive(t *testing.T) {
	for _, c := range []struct{ v, want time.Duration }{{0, 5}, {-1, 5}, {3, 3}} {
		v := c.v
		Positive(&v, 5)
		if v != c.want {
			t.Errorf("Positive(%d, 5) = %d, want %d", c.v, v, c.want)
		}
	}
}

func TestZero(t *testing.T) {
	for _, c := range []struct{ v, want time.Duration }{{0, 5}, {-1, -1}, {3, 3}} {
		v := c.v
		Zero(&v, 5)
		if v != c.want {
			t.Errorf("Zero(%d, 5) = %d, want %d", c.v, v, c.want)
		}
	}
	s := ""
	if Zero(&s, "d"); s != "d" {
		t.Errorf(`Zero("", "d") = %q`, s)
	}
}

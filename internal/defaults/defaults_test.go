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

func TestRange(t *testing.T) {
	for _, c := range []struct{ lo, hi, wantLo, wantHi time.Duration }{
		{0, 0, 1, 60},   // both unset: the defaults
		{2, 0, 2, 60},   // a floor alone: the default ceiling
		{2, 10, 2, 10},  // both set
		{90, 0, 90, 90}, // a floor above the default ceiling: the ceiling follows it
		{5, 3, 5, 60},   // a ceiling below the floor: the default ceiling
		{-1, -1, 1, 60}, // negative is unset
	} {
		lo, hi := c.lo, c.hi
		Range(&lo, &hi, 1, 60)
		if lo != c.wantLo || hi != c.wantHi {
			t.Errorf("Range(%d, %d) = %d, %d, want %d, %d", c.lo, c.hi, lo, hi, c.wantLo, c.wantHi)
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

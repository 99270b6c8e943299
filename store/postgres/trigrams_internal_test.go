package postgres

import (
	"slices"
	"testing"
)

func TestASCIITrigrams(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		fq   string
		want []string
	}{
		{`"idem-6043245"`, []string{"ide", "dem", "604", "043", "432", "324", "245"}},
		{"ab-cd", nil},
		{"aaaa", []string{"aaa"}},
		{"café au lait", []string{"caf", "lai", "ait"}},
	} {
		if got := asciiTrigrams(c.fq); !slices.Equal(got, c.want) {
			t.Errorf("asciiTrigrams(%q) = %q, want %q", c.fq, got, c.want)
		}
	}
}

func TestChooseTrigrams(t *testing.T) {
	t.Parallel()
	ts := []string{"ide", "dem", "604", "043", "432", "324", "245"}
	for _, c := range []struct {
		name   string
		counts []int64
		docs   float64
		want   []string
	}{
		// The rarest first, until few candidates are left: 1e7 × (20/2000)³ = 10.
		{"rare digits", []int64{2000, 2000, 40, 20, 30, 25, 20}, 1e7, []string{"043", "245", "324"}},
		// At most probeTrigramsMax.
		{"common digits", []int64{2000, 2000, 200, 210, 220, 230, 240}, 1e7, []string{"604", "043", "432", "324"}},
		// A trigram in more than probeCommon of the sample only when none is rarer.
		{"every one common", []int64{2000, 2000, 1900, 1900, 1900, 1900, 1900}, 1e7, []string{"604"}},
		{"stop at common", []int64{2000, 2000, 1, 1000, 1000, 1000, 1000}, 1e7, []string{"604"}},
		// None in the sample: one is enough.
		{"absent", []int64{2000, 2000, 0, 0, 0, 0, 0}, 1e5, []string{"604"}},
	} {
		if got := chooseTrigrams(ts, c.counts, 2000, c.docs); !slices.Equal(got, c.want) {
			t.Errorf("%s: chooseTrigrams = %q, want %q", c.name, got, c.want)
		}
	}
	if got := chooseTrigrams(ts, make([]int64, len(ts)), 0, 1e7); got != nil {
		t.Errorf("nothing sampled: %q, want nil (the whole text)", got)
	}
}

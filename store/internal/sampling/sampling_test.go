package sampling

import (
	"fmt"
	"maps"
	"slices"
	"testing"
)

func TestAllocate(t *testing.T) {
	t.Parallel()
	groups := []Group{{"a", 1}, {"b", 2}, {"c", 10}, {"d", 100}, {"e", 3}}
	cases := []struct {
		name string
		size int
		want map[string]int // nil: check the invariants only
	}{
		{"whole set", 116, map[string]int{"a": 1, "b": 2, "c": 10, "d": 100, "e": 3}},
		{"more than the set", 500, map[string]int{"a": 1, "b": 2, "c": 10, "d": 100, "e": 3}},
		{"one per group", 5, map[string]int{"a": 1, "b": 1, "c": 1, "d": 1, "e": 1}},
		{"proportional rest", 16, nil},
		{"fewer than groups", 3, nil},
	}
	for _, c := range cases {
		for seed := range int64(20) {
			got := Allocate(groups, c.size, seed)
			if c.want != nil && !maps.Equal(got, c.want) {
				t.Fatalf("%s: %v, want %v", c.name, got, c.want)
			}
			sum := 0
			for _, g := range groups {
				if got[g.Key] > int(g.Size) || got[g.Key] < 0 {
					t.Fatalf("%s: group %s gets %d of %d", c.name, g.Key, got[g.Key], g.Size)
				}
				if c.size >= len(groups) && got[g.Key] == 0 {
					t.Fatalf("%s: group %s left out", c.name, g.Key)
				}
				if c.size < len(groups) && got[g.Key] > 1 {
					t.Fatalf("%s: group %s gets %d, want at most one", c.name, g.Key, got[g.Key])
				}
				sum += got[g.Key]
			}
			if sum != min(c.size, 116) {
				t.Fatalf("%s: %d allocated, want %d", c.name, sum, min(c.size, 116))
			}
		}
	}
	// The rest follows the sizes: the big group takes most of it.
	if got := Allocate(groups, 16, 1); got["d"] < 9 {
		t.Fatalf("proportional: %v", got)
	}
}

func TestPickIsReproducibleAndOrderFree(t *testing.T) {
	t.Parallel()
	var ids []string
	for i := range 100 {
		ids = append(ids, fmt.Sprintf("id-%03d", i))
	}
	a := Pick(slices.Clone(ids), 10, 42)
	rev := slices.Clone(ids)
	slices.Reverse(rev)
	b := Pick(rev, 10, 42)
	if !slices.Equal(a, b) {
		t.Fatalf("the same seed over the same set in another order: %v vs %v", a, b)
	}
	if c := Pick(slices.Clone(ids), 10, 43); slices.Equal(a, c) {
		t.Fatal("two seeds gave the same sample")
	}
	if got := Pick(slices.Clone(ids[:3]), 10, 1); len(got) != 3 {
		t.Fatalf("Pick of 10 from 3 = %v", got)
	}
}

func TestOffsetSpreadsSeeds(t *testing.T) {
	t.Parallel()
	seen := map[int64]bool{}
	for seed := range int64(1000) {
		o := Offset(seed)
		if o < 0 || o >= RankSpace || seen[o] {
			t.Fatalf("Offset(%d) = %d", seed, o)
		}
		seen[o] = true
	}
	if r := Rank(); r < 0 || r >= RankSpace {
		t.Fatalf("Rank() = %d", r)
	}
}

func TestSpanAndEstimate(t *testing.T) {
	t.Parallel()
	if Span(10, 19) != 10 || Span(RankSpace-5, 4) != 10 {
		t.Fatalf("Span: %d %d", Span(10, 19), Span(RankSpace-5, 4))
	}
	if e := EstimateSize(100, RankSpace/1000); e < 99_000 || e > 101_000 {
		t.Fatalf("EstimateSize = %v, want 100000", e)
	}
}

func TestStratifyEveryGroup(t *testing.T) {
	t.Parallel()
	var members []Member
	for g, n := range []int{1, 4, 9, 30} {
		for i := range n {
			members = append(members, Member{ID: fmt.Sprintf("%d-%d", g, i), Key: fmt.Sprint(g)})
		}
	}
	for seed := range int64(50) {
		got := Stratify(slices.Clone(members), 6, seed)
		keys := map[byte]bool{}
		for _, id := range got {
			keys[id[0]] = true
		}
		if len(got) != 6 || len(keys) != 4 {
			t.Fatalf("seed %d: %v", seed, got)
		}
		if again := Stratify(slices.Clone(members), 6, seed); !slices.Equal(got, again) {
			t.Fatalf("seed %d not reproducible", seed)
		}
	}
}

func TestSmallGroupsKeepsToTheBudget(t *testing.T) {
	t.Parallel()
	groups := []Group{{"a", 5}, {"b", 3000}, {"c", 40}, {"d", 40}, {"e", 1}, {"f", 30}}
	alloc := map[string]int{"a": 1, "b": 3, "c": 1, "d": 1, "f": 1} // e gets none
	got := SmallGroups(groups, alloc, 100, 80)
	// Smallest first: a (5), f (30), c (40) = 75; d would pass 80; b is large.
	if want := []string{"a", "f", "c"}; !slices.Equal(got, want) {
		t.Fatalf("SmallGroups = %v, want %v", got, want)
	}
}

package sampling

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// memSet is a Reader over messages held in memory, as a store's SQL
// would answer; multi adds the GroupArcs capability.
type memSet struct {
	ms    []Ranked
	col   string
	reads *int // ArcPart and GroupArcParts calls
}

type multiSet struct{ memSet }

func (s memSet) ArcPart(_ context.Context, key string, wrapped bool, off int64, k int) ([]Ranked, error) {
	*s.reads++
	return s.part(key, wrapped, off, k), nil
}

func (s memSet) part(key string, wrapped bool, off int64, k int) []Ranked {
	var out []Ranked
	for _, r := range s.ms {
		if (key == "" || keyOf(s.col, r.M) == key) && (r.Rank >= off) != wrapped {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b Ranked) int { return cmp.Or(cmp.Compare(a.Rank, b.Rank), cmp.Compare(a.M.ID, b.M.ID)) })
	return out[:min(k, len(out))]
}

func (s memSet) IDs(_ context.Context, limit int) ([]string, error) {
	var out []string
	for _, r := range s.ms[:min(limit, len(s.ms))] {
		out = append(out, r.M.ID)
	}
	return out, nil
}

func (s memSet) ByID(_ context.Context, ids []string) ([]*quarantine.Message, error) {
	var out []*quarantine.Message
	for _, r := range s.ms {
		if slices.Contains(ids, r.M.ID) {
			out = append(out, r.M)
		}
	}
	return out, nil
}

func (s memSet) Groups(context.Context) ([]Group, error) {
	n := map[string]int64{}
	for _, r := range s.ms {
		n[keyOf(s.col, r.M)]++
	}
	var out []Group
	for k, v := range n {
		out = append(out, Group{k, v})
	}
	return out, nil
}

func (s memSet) Members(_ context.Context, keys []string) ([]Member, error) {
	var out []Member
	for _, r := range s.ms {
		if k := keyOf(s.col, r.M); keys == nil || slices.Contains(keys, k) {
			out = append(out, Member{r.M.ID, k})
		}
	}
	return out, nil
}

func (s multiSet) GroupArcParts(_ context.Context, want map[string]int, wrapped bool, off int64) ([]Ranked, error) {
	*s.reads++
	var out []Ranked
	for key, k := range want {
		out = append(out, s.part(key, wrapped, off, k)...)
	}
	return out, nil
}

func memMessages(n, groups int) []Ranked {
	out := make([]Ranked, n)
	for i := range out {
		out[i] = Ranked{M: &quarantine.Message{ID: fmt.Sprintf("m%04d", i), Fingerprint: fmt.Sprintf("g%d", i%groups),
			FailedAt: time.Unix(int64(i%7), 0)}, Rank: Rank()}
	}
	return out
}

func ids(ms []*quarantine.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	slices.Sort(out)
	return out
}

func TestUniformExactOrArc(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reads := 0
	set := memSet{ms: memMessages(300, 5), reads: &reads}
	direct := func(fn func(Reader) error) error { return fn(set) }
	for _, c := range []struct {
		name  string
		exact int
		want  func(seed int64) []string
	}{
		{"exact", 1000, func(seed int64) []string {
			all, _ := set.IDs(ctx, 300)
			return slices.Sorted(slices.Values(Pick(all, 10, seed)))
		}},
		{"arc", 10, func(seed int64) []string { a, _ := Arc(ctx, set, "", Offset(seed), 10); return ids(Messages(a)) }},
	} {
		for seed := range int64(20) {
			got, err := Uniform(ctx, set, direct, Limits{Exact: c.exact, SmallGroup: 1}, 10, seed)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ids(got), c.want(seed)) {
				t.Fatalf("%s, seed %d: %v, want %v", c.name, seed, ids(got), c.want(seed))
			}
		}
	}
	// An arc that wraps around is k messages all the same.
	got, _ := Arc(ctx, set, "", RankSpace-1, 10)
	if len(got) != 10 {
		t.Fatalf("a wrapped arc of %d messages, want 10", len(got))
	}
	// The whole set, when it is smaller than the sample.
	if got, _ := Uniform(ctx, set, direct, Limits{Exact: 10, SmallGroup: 1}, 500, 1); len(got) != 300 {
		t.Fatalf("%d of a set of 300, want all", len(got))
	}
}

func TestStratifiedSameWithOrWithoutGroupArcs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for seed := range int64(20) {
		var r1, r2 int
		ms := memMessages(2000, 7)
		one := memSet{ms: ms, col: "fingerprint", reads: &r1}
		multi := multiSet{memSet{ms: ms, col: "fingerprint", reads: &r2}}
		lim := Limits{Exact: 100, SmallGroup: 10} // every group by arcs
		a, err := Stratified(ctx, one, "fingerprint", lim, 50, seed)
		if err != nil {
			t.Fatal(err)
		}
		b, err := Stratified(ctx, multi, "fingerprint", lim, 50, seed)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ids(a), ids(b)) || len(a) != 50 {
			t.Fatalf("seed %d: %d messages %v by groups, %d %v at once", seed, len(a), ids(a), len(b), ids(b))
		}
		if r2 > 2 || r1 < 7 {
			t.Fatalf("seed %d: %d reads at once (want at most 2), %d by groups", seed, r2, r1)
		}
		per := map[string]int{}
		for _, m := range a {
			per[m.Fingerprint]++
		}
		if len(per) != 7 {
			t.Fatalf("seed %d: groups %v, want all 7", seed, per)
		}
	}
}

func TestOrderIsNewestFirst(t *testing.T) {
	t.Parallel()
	ms := Messages(memMessages(50, 3))
	got := Order(ms)
	if !slices.IsSortedFunc(got, func(a, b *quarantine.Message) int {
		return cmp.Or(b.FailedAt.Compare(a.FailedAt), cmp.Compare(b.ID, a.ID))
	}) {
		t.Fatal("not newest first")
	}
	if Order(nil) == nil {
		t.Fatal("Order(nil) is nil, want an empty sample")
	}
}

package sampling

import (
	"cmp"
	"context"
	"slices"

	"github.com/quarantine-dev/quarantine"
)

// Reader reads one filtered set for a sample: what a store's dialect SQL
// answers. The rules of what to read, and what to take from the answers,
// are Uniform's and Stratified's.
type Reader interface {
	// ArcPart returns up to k messages of the set (of the group key only,
	// when key is not ""), without payloads, in (rank, id) order: those
	// whose rank is at least off, or below off when wrapped.
	ArcPart(ctx context.Context, key string, wrapped bool, off int64, k int) ([]Ranked, error)
	// IDs returns up to limit ids of the set, in any order.
	IDs(ctx context.Context, limit int) ([]string, error)
	// ByID returns the messages of ids, without payloads, in any order.
	ByID(ctx context.Context, ids []string) ([]*quarantine.Message, error)
	// Groups returns the key and size of every group of the set.
	Groups(ctx context.Context) ([]Group, error)
	// Members returns the id and group key of every message of the set
	// (of the groups keys only, when keys is not nil).
	Members(ctx context.Context, keys []string) ([]Member, error)
}

// GroupArcs is an optional capability of a Reader: the arc parts of
// several groups in one query. Without it, a group's part is ArcPart's.
type GroupArcs interface {
	// GroupArcParts returns, for each key of want, up to want[key]
	// messages of that group as ArcPart(ctx, key, wrapped, off, want[key])
	// would, in any order.
	GroupArcParts(ctx context.Context, want map[string]int, wrapped bool, off int64) ([]Ranked, error)
}

// Ranked is a message read with its rank.
type Ranked struct {
	M    *quarantine.Message
	Rank int64
}

// Limits are a store's thresholds (Exact and SmallGroup unless a test
// lowers them).
type Limits struct {
	Exact, SmallGroup int
}

// Filter validates r, filling its defaults, and returns the filter a
// sample reads: r.Filter without cursor or limit. Errors: EINVALID naming
// the field.
func Filter(r *quarantine.SampleRequest) (quarantine.Filter, error) {
	if err := r.Validate(); err != nil {
		return quarantine.Filter{}, err
	}
	f := r.Filter
	f.After, f.Limit = nil, 1
	if err := f.Validate(); err != nil {
		return quarantine.Filter{}, err
	}
	return f, nil
}

// ReadyFilter is Filter, then ready: the store's wait until its search
// index has caught up for the filter's text.
func ReadyFilter(ctx context.Context, r *quarantine.SampleRequest, ready func(ctx context.Context, text string) error) (quarantine.Filter, error) {
	f, err := Filter(r)
	if err != nil {
		return f, err
	}
	return f, ready(ctx, f.Text)
}

// Column is the column, and the group key, of a stratification.
func Column(by string) string {
	if by == quarantine.StratifyQueue {
		return "queue"
	}
	return "fingerprint"
}

// keyOf returns m's key in the stratification of column col.
func keyOf(col string, m *quarantine.Message) string {
	if col == "queue" {
		return m.Queue
	}
	return m.Fingerprint
}

// Order sorts a sample as a list is ordered, newest first (failed_at,
// then id, descending), and returns it (never nil).
func Order(ms []*quarantine.Message) []*quarantine.Message {
	slices.SortFunc(ms, func(a, b *quarantine.Message) int {
		return cmp.Or(b.FailedAt.Compare(a.FailedAt), cmp.Compare(b.ID, a.ID))
	})
	if ms == nil {
		ms = []*quarantine.Message{}
	}
	return ms
}

// Arc returns up to k messages of the set (of group key, when key is not
// "") in rank order from off, wrapping around to rank 0.
func Arc(ctx context.Context, rd Reader, key string, off int64, k int) ([]Ranked, error) {
	out, err := rd.ArcPart(ctx, key, false, off, k)
	if err != nil || len(out) >= k {
		return out, err
	}
	rest, err := rd.ArcPart(ctx, key, true, off, k-len(out))
	return append(out, rest...), err
}

// Messages returns the messages of rs.
func Messages(rs []Ranked) []*quarantine.Message {
	out := make([]*quarantine.Message, len(rs))
	for i, r := range rs {
		out[i] = r.M
	}
	return out
}

// Uniform samples k messages of the set rd reads: the arc of the seed's
// offset, unless the set proves small enough for the exact method. The
// size is estimated from the arc, without counting the set; only when
// the estimate is below twice the exact limit are the set's ids read
// (Exact+1 at most), and with no more than Exact of them the sample is
// picked from them. exact runs those reads (and the messages of the ids
// picked) in one snapshot: a store that read the arc outside one passes
// a function opening it; otherwise it calls its argument with rd.
func Uniform(ctx context.Context, rd Reader, exact func(func(Reader) error) error, lim Limits, k int, seed int64) ([]*quarantine.Message, error) {
	off := Offset(seed)
	arc, err := Arc(ctx, rd, "", off, k)
	if err != nil {
		return nil, err
	}
	if len(arc) < k || EstimateSize(k, Span(off, arc[k-1].Rank)) > 2*float64(lim.Exact) {
		return Messages(arc), nil // the whole set, or a large one
	}
	out := Messages(arc)
	err = exact(func(rd Reader) error {
		ids, err := rd.IDs(ctx, lim.Exact+1)
		if err != nil || len(ids) > lim.Exact {
			return err // the arc stands
		}
		out, err = rd.ByID(ctx, Pick(ids, k, seed))
		return err
	})
	return out, err
}

// Stratified samples size messages of the set rd reads with every group
// of column col (Column) represented, as far as size allows: a set of at
// most Exact messages exactly (Stratify over its members); a larger one
// by Allocate, reading the members of the small groups (SmallGroups) and
// an arc of each other group from the seed's offset. rd should read one
// snapshot.
func Stratified(ctx context.Context, rd Reader, col string, lim Limits, size int, seed int64) ([]*quarantine.Message, error) {
	groups, err := rd.Groups(ctx)
	if err != nil {
		return nil, err
	}
	var total int64
	for _, g := range groups {
		total += g.Size
	}
	if total <= int64(lim.Exact) {
		members, err := rd.Members(ctx, nil)
		if err != nil {
			return nil, err
		}
		return rd.ByID(ctx, Stratify(members, size, seed))
	}
	alloc := Allocate(groups, size, seed)
	small := SmallGroups(groups, alloc, lim.SmallGroup, lim.Exact)
	want := map[string]int{} // groups sampled by arcs, and how many each
	for _, g := range groups {
		if k := alloc[g.Key]; k > 0 && !slices.Contains(small, g.Key) {
			want[g.Key] = k
		}
	}
	out, err := groupArcs(ctx, rd, col, want, Offset(seed))
	if err != nil || len(small) == 0 {
		return out, err
	}
	members, err := rd.Members(ctx, small)
	if err != nil {
		return nil, err
	}
	ms, err := rd.ByID(ctx, Take(members, alloc, seed))
	return append(out, ms...), err
}

// groupArcs reads, for each group key of want, the arc of want[key]
// messages from off in that group, wrapping around (want is used up).
func groupArcs(ctx context.Context, rd Reader, col string, want map[string]int, off int64) ([]*quarantine.Message, error) {
	var out []*quarantine.Message
	ga, multi := rd.(GroupArcs)
	for _, wrapped := range []bool{false, true} {
		for key, k := range want {
			if k <= 0 {
				delete(want, key)
			}
		}
		if len(want) == 0 {
			break
		}
		var rs []Ranked
		if multi {
			var err error
			if rs, err = ga.GroupArcParts(ctx, want, wrapped, off); err != nil {
				return nil, err
			}
		} else {
			keys := make([]string, 0, len(want))
			for key := range want {
				keys = append(keys, key)
			}
			slices.Sort(keys)
			for _, key := range keys {
				part, err := rd.ArcPart(ctx, key, wrapped, off, want[key])
				if err != nil {
					return nil, err
				}
				rs = append(rs, part...)
			}
		}
		for _, r := range rs {
			out = append(out, r.M)
			want[keyOf(col, r.M)]--
		}
	}
	return out, nil
}

// Source is what Sample needs of a store, for one validated filter.
type Source interface {
	// Reader reads outside a transaction: the arc of a uniform sample,
	// which a large set answers alone.
	Reader() Reader
	// Snapshot calls fn with a reader of one consistent snapshot,
	// grouping by column col ("" when none).
	Snapshot(ctx context.Context, col string, fn func(Reader) error) error
}

// Sample is a store's Sample (see store.Store): r validated and the
// store's search index waited for (ReadyFilter with ready), then a
// uniform sample (Uniform: the arc through the Reader, the exact method
// in one Snapshot) or a stratified one (Stratified, in one Snapshot), in
// list order (Order). source gives the store's Source for the validated
// filter. Errors: EINVALID naming the field, ready's, the source's.
func Sample(ctx context.Context, r quarantine.SampleRequest, ready func(ctx context.Context, text string) error, lim Limits, source func(quarantine.Filter) Source) ([]*quarantine.Message, error) {
	f, err := ReadyFilter(ctx, &r, ready)
	if err != nil {
		return nil, err
	}
	src := source(f)
	var out []*quarantine.Message
	if r.StratifyBy == quarantine.StratifyNone {
		exact := func(fn func(Reader) error) error { return src.Snapshot(ctx, "", fn) }
		out, err = Uniform(ctx, src.Reader(), exact, lim, r.Size, r.Seed)
	} else {
		col := Column(r.StratifyBy)
		err = src.Snapshot(ctx, col, func(rd Reader) (err error) {
			out, err = Stratified(ctx, rd, col, lim, r.Size, r.Seed)
			return err
		})
	}
	if err != nil {
		return nil, err
	}
	return Order(out), nil
}

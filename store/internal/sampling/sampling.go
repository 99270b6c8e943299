package sampling

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
)

// RankSpace bounds the random rank of a message: ranks are uniform in
// [0, RankSpace). 2^52 keeps every rank exact in a float64 (PostgreSQL
// draws it from random()).
const RankSpace int64 = 1 << 52

// Exact is the largest filtered set sampled exactly; larger sets use the
// rank method.
const Exact = 20000

// SmallGroup is the size up to which a group of a stratified sample over
// a large set is sampled exactly (its members are read) rather than by an
// arc of ranks.
const SmallGroup = 2000

// Rank returns a fresh random rank for a new message.
func Rank() int64 { return rand.Int64N(RankSpace) }

// Offset returns the rank at which the sample of seed starts: a splitmix64
// scramble of the seed, so that neighbouring seeds start far apart.
func Offset(seed int64) int64 {
	z := uint64(seed) + 0x9E3779B97F4A7C15
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	z ^= z >> 31
	return int64(z % uint64(RankSpace))
}

// rng returns the generator of seed.
func rng(seed int64) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(seed), 0x71756172616e7469)) // "quaranti"
}

// EstimateSize estimates how many messages match, from an arc of the rank
// circle: got messages were found in span consecutive ranks.
func EstimateSize(got int, span int64) float64 {
	if span <= 0 {
		return math.Inf(1)
	}
	return float64(got) * float64(RankSpace) / float64(span)
}

// Span returns how many ranks an arc covers that starts at off and ends
// at last (inclusive), wrapping around the circle when last < off.
func Span(off, last int64) int64 {
	if last >= off {
		return last - off + 1
	}
	return RankSpace - off + last + 1
}

// Pick returns k of ids, chosen uniformly at random without replacement by
// the generator of seed, in the order drawn. ids is sorted first (in
// place), so that the result does not depend on the order the database
// returned them in. With k >= len(ids), every id is returned.
func Pick(ids []string, k int, seed int64) []string {
	slices.Sort(ids)
	return pick(ids, k, rng(seed))
}

// pick takes k elements of s (in place) by a partial Fisher-Yates shuffle.
func pick[T any](s []T, k int, r *rand.Rand) []T {
	k = min(k, len(s))
	for i := range k {
		j := i + r.IntN(len(s)-i)
		s[i], s[j] = s[j], s[i]
	}
	return s[:k]
}

// SmallGroups returns the keys of the groups given messages by alloc that
// are sampled exactly, by reading their members: those of at most
// smallGroup messages, smallest first, as long as the members read in all
// stay within budget. The others are sampled by an arc of ranks.
func SmallGroups(groups []Group, alloc map[string]int, smallGroup, budget int) []string {
	gs := slices.Clone(groups)
	slices.SortFunc(gs, func(a, b Group) int { return cmp.Or(cmp.Compare(a.Size, b.Size), cmp.Compare(a.Key, b.Key)) })
	var out []string
	var read int64
	for _, g := range gs {
		if alloc[g.Key] == 0 {
			continue
		}
		if g.Size > int64(smallGroup) || read+g.Size > int64(budget) {
			break
		}
		read += g.Size
		out = append(out, g.Key)
	}
	return out
}

// Member is a message of a stratified set: its ID and its group key
// (fingerprint or queue).
type Member struct {
	ID  string
	Key string
}

// Group is one stratum: its key and how many messages it holds.
type Group struct {
	Key  string
	Size int64
}

// Allocate says how many messages to take from each group for a sample of
// size messages, keyed by group key (groups given none are absent):
//
//   - size at least the whole set: every message;
//   - size at least the number of groups: one from each group, and the
//     rest shared in proportion to what each group has beyond that one
//     (largest remainders, ties to the smaller key), so every group is
//     present;
//   - fewer than the groups: one from each of size groups, drawn without
//     replacement with chances weighted by group size (seeded).
//
// groups must have distinct keys and positive sizes.
func Allocate(groups []Group, size int, seed int64) map[string]int {
	gs := slices.Clone(groups)
	slices.SortFunc(gs, func(a, b Group) int { return cmp.Compare(a.Key, b.Key) })
	var total int64
	for _, g := range gs {
		total += g.Size
	}
	out := make(map[string]int, len(gs))
	switch {
	case int64(size) >= total:
		for _, g := range gs {
			out[g.Key] = int(g.Size)
		}
	case size >= len(gs):
		rest := int64(size - len(gs))
		spare := total - int64(len(gs)) // > 0, since size < total
		type share struct {
			key  string
			frac float64
		}
		var shares []share
		given := int64(0)
		for _, g := range gs {
			exact := float64(rest) * float64(g.Size-1) / float64(spare)
			whole := int64(exact)
			out[g.Key] = 1 + int(whole)
			given += whole
			shares = append(shares, share{g.Key, exact - float64(whole)})
		}
		slices.SortStableFunc(shares, func(a, b share) int { return cmp.Compare(b.frac, a.frac) })
		for i := 0; given < rest; i++ {
			out[shares[i].key]++
			given++
		}
	default:
		// Efraimidis-Spirakis: key u^(1/w); the size largest keys win.
		r := rng(seed)
		type draw struct {
			key string
			v   float64
		}
		ds := make([]draw, len(gs))
		for i, g := range gs {
			ds[i] = draw{g.Key, math.Log(1-r.Float64()) / float64(g.Size)}
		}
		slices.SortStableFunc(ds, func(a, b draw) int { return cmp.Compare(b.v, a.v) })
		for _, d := range ds[:size] {
			out[d.key] = 1
		}
	}
	return out
}

// Stratify takes a stratified sample of size from members (the whole
// filtered set) with the generator of seed: Allocate over the groups,
// then Take. It returns the chosen IDs.
func Stratify(members []Member, size int, seed int64) []string {
	sortMembers(members)
	var groups []Group
	for i, m := range members {
		if i == 0 || m.Key != members[i-1].Key {
			groups = append(groups, Group{Key: m.Key})
		}
		groups[len(groups)-1].Size++
	}
	return Take(members, Allocate(groups, size, seed), seed)
}

func sortMembers(members []Member) {
	slices.SortFunc(members, func(a, b Member) int {
		return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.ID, b.ID))
	})
}

// Take picks alloc[key] members of each group uniformly at random without
// replacement, with the generator of seed. members is sorted in place by
// (key, id) first; groups absent from alloc give none. It returns the
// chosen IDs, group by group in key order.
func Take(members []Member, alloc map[string]int, seed int64) []string {
	sortMembers(members)
	r := rng(seed ^ 0x5bd1e995)
	var out []string
	for lo := 0; lo < len(members); {
		hi := lo
		for hi < len(members) && members[hi].Key == members[lo].Key {
			hi++
		}
		if k := alloc[members[lo].Key]; k > 0 {
			ids := make([]string, hi-lo)
			for i := range ids {
				ids[i] = members[lo+i].ID
			}
			out = append(out, pick(ids, k, r)...)
		}
		lo = hi
	}
	return out
}

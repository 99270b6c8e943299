package ops

import (
	"slices"

	"github.com/quarantine-dev/quarantine"
)

// The selection of a bulk action (replay, discard) by filter, written
// once for both stores: the filter narrowed to the caller's owners, then
// read in id order a chunk at a time (keyset on the id), so that no
// statement and no transaction holds more than one chunk. A store
// supplies the read of one chunk (its SQL); exactness over the chunks is
// the caller's (one snapshot for every read: see replays.Pin).

// Chunk is how many messages one chunk of a bulk selection holds.
const Chunk = 2000

// SelectFilter returns f ready for a bulk selection limited to owners (nil:
// every owner): narrowed to them, without cursor, validated (EINVALID
// naming the field). ok is false when no message can match (f names only
// other owners).
func SelectFilter(f quarantine.Filter, owners []string) (out quarantine.Filter, ok bool, err error) {
	if f, ok = NarrowFilter(f, owners); !ok {
		return f, false, nil
	}
	f.After, f.Limit = nil, 1
	if err := f.Validate(); err != nil {
		return f, false, err
	}
	return f, true, nil
}

// Chunks calls fn with each chunk of what read returns, in id order:
// read(after, limit) returns up to limit rows whose id (as id gives it) is
// above after ("" for the first chunk), in id order. It stops after a
// short chunk, or at the first error.
func Chunks[T any](size int, id func(T) string, read func(after string, limit int) ([]T, error), fn func([]T) error) error {
	after := ""
	for {
		rows, err := read(after, size)
		if err != nil {
			return err
		}
		if len(rows) > 0 {
			if err := fn(rows); err != nil {
				return err
			}
			after = id(rows[len(rows)-1])
		}
		if len(rows) < size {
			return nil
		}
	}
}

// NarrowFilter returns f limited to owners (nil: every owner), and false
// when no message can match (f names only other owners).
func NarrowFilter(f quarantine.Filter, owners []string) (quarantine.Filter, bool) {
	if owners == nil {
		return f, true
	}
	if len(f.Owner) == 0 {
		f.Owner = slices.Clone(owners)
		return f, len(owners) > 0
	}
	var keep []string
	for _, o := range f.Owner {
		if slices.Contains(owners, o) {
			keep = append(keep, o)
		}
	}
	f.Owner = keep
	return f, len(keep) > 0
}

// Visible reports whether a message of owner may be selected by a
// request limited to owners (nil: every owner).
func Visible(owners []string, owner string) bool {
	return owners == nil || slices.Contains(owners, owner)
}

// ReplayByIDs returns one candidate per distinct id of ids, in the order
// given: the one read returns for it (read gets ValidIDs(ids) and returns
// the messages it found) when its owner is visible to owners, else a
// candidate not found.
func ReplayByIDs(ids, owners []string, read func(valid []string) ([]quarantine.ReplayCandidate, error)) ([]quarantine.ReplayCandidate, error) {
	found := map[string]quarantine.ReplayCandidate{}
	if valid := ValidIDs(ids); len(valid) > 0 {
		cs, err := read(valid)
		if err != nil {
			return nil, err
		}
		for _, c := range cs {
			if Visible(owners, c.Owner) {
				found[c.ID] = c
			}
		}
	}
	seen := make(map[string]bool, len(ids))
	out := make([]quarantine.ReplayCandidate, 0, len(ids))
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		c, ok := found[id]
		if !ok {
			c = quarantine.ReplayCandidate{ID: quarantine.SanitizeText(id)}
		}
		out = append(out, c)
	}
	return out, nil
}

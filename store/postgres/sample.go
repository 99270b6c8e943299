package postgres

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/sampling"
)

// Sampling (see package sampling for the two methods and what "uniform"
// means for each). A set of at most sampling.Exact messages is sampled
// exactly: its ids are read (an index-only scan, LIMIT Exact+1) and picked
// in Go. A larger set is sampled by rank: the first k messages at or after
// the seed's offset in messages_sample_idx (sample_rank, id) order,
// wrapping around; a stratified sample takes one such arc per group,
// through messages_fingerprint_sample_idx for fingerprints. The cost is
// that of reading k index entries and k rows, not of sorting the set.
//
// Which method applies is found without counting the set: the rank arc is
// read first, and the span of ranks it covers estimates the size of the
// set; only when the estimate is below twice sampling.Exact is the set
// probed for the exact method.

// rankedMessage is a message read with its rank.
type rankedMessage struct {
	m    *quarantine.Message
	rank int64
}

// Sample returns a random sample of the messages matching r.Filter,
// ordered newest first like a list; see store.Store. The exact method and
// stratified samples read in one snapshot; the arc of a large uniform
// sample is one query (two when it wraps around). Errors: EINVALID naming
// the field, EUNAVAILABLE, EINTERNAL.
func (s *Store) Sample(ctx context.Context, r quarantine.SampleRequest) ([]*quarantine.Message, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	f := r.Filter
	f.After, f.Limit = nil, 1
	if err := f.Validate(); err != nil {
		return nil, err
	}
	if err := s.searchReady(ctx, f.Text); err != nil {
		return nil, err
	}
	var out []*quarantine.Message
	var err error
	if r.StratifyBy == quarantine.StratifyNone {
		out, err = s.sampleUniform(ctx, &f, r.Size, r.Seed)
	} else {
		opts := pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}
		err = s.inTxOpts(ctx, opts, "sample messages", func(tx pgx.Tx) error {
			var err error
			out, err = s.sampleStratified(ctx, tx, &f, r.StratifyBy, r.Size, r.Seed)
			return err
		})
	}
	if err != nil {
		return nil, translate(err, "sample messages")
	}
	slices.SortFunc(out, func(a, b *quarantine.Message) int {
		if c := b.FailedAt.Compare(a.FailedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	return out, nil
}

// sampleUniform samples k messages matching f. A large set costs one
// query (two when the arc wraps around), outside a transaction; a set
// small enough for the exact method is then read again in one snapshot.
func (s *Store) sampleUniform(ctx context.Context, f *quarantine.Filter, k int, seed int64) ([]*quarantine.Message, error) {
	off := sampling.Offset(seed)
	arc, err := readArc(ctx, s.pool, f, "", "", off, k)
	if err != nil {
		return nil, err
	}
	if len(arc) < k {
		return messagesOf(arc), nil // the whole set
	}
	if sampling.EstimateSize(k, sampling.Span(off, arc[k-1].rank)) > 2*float64(s.exact) {
		return messagesOf(arc), nil
	}
	var out []*quarantine.Message
	opts := pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}
	err = s.inTxOpts(ctx, opts, "sample messages", func(tx pgx.Tx) error {
		w := filterWhere(f)
		rows, err := tx.Query(ctx, "SELECT m.id FROM messages m"+w.sql()+" LIMIT "+strconv.Itoa(s.exact+1), w.args...)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		if len(ids) > s.exact {
			out = messagesOf(arc)
			return nil
		}
		out, err = messagesByID(ctx, tx, sampling.Pick(ids, k, seed))
		return err
	})
	return out, err
}

// readArc returns up to k messages matching f (and key col = val when col
// is set) in rank order from off, wrapping around to rank 0.
func readArc(ctx context.Context, tx querier, f *quarantine.Filter, col, val string, off int64, k int) ([]rankedMessage, error) {
	out, err := arcPart(ctx, tx, f, col, val, ">=", off, k)
	if err != nil || len(out) == k {
		return out, err
	}
	rest, err := arcPart(ctx, tx, f, col, val, "<", off, k-len(out))
	return append(out, rest...), err
}

func arcPart(ctx context.Context, tx querier, f *quarantine.Filter, col, val, op string, off int64, k int) ([]rankedMessage, error) {
	q, args := arcQuery(f, col, val, op, off, k)
	return queryRanked(ctx, tx, q, args)
}

// arcQuery returns the SQL of up to k messages matching f (and col = val)
// whose rank is op off, in rank order.
func arcQuery(f *quarantine.Filter, col, val, op string, off int64, k int) (string, []any) {
	w := filterWhere(f)
	if col != "" {
		w.conds = append(w.conds, "m."+col+" = "+w.arg(val))
	}
	w.conds = append(w.conds, "m.sample_rank "+op+" "+w.arg(off))
	return "SELECT " + messageColumns + ", m.sample_rank FROM messages m" + w.sql() +
		" ORDER BY m.sample_rank, m.id LIMIT " + w.arg(k), w.args
}

func queryRanked(ctx context.Context, tx querier, q string, args []any) ([]rankedMessage, error) {
	rows, err := tx.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	var out []rankedMessage
	var r messageRow
	var rank int64
	_, err = pgx.ForEachRow(rows, append(r.dest(), &rank), func() error {
		m, err := r.message()
		if err != nil {
			return err
		}
		out = append(out, rankedMessage{m, rank})
		r = messageRow{}
		return nil
	})
	return out, err
}

func messagesOf(rs []rankedMessage) []*quarantine.Message {
	out := make([]*quarantine.Message, len(rs))
	for i, r := range rs {
		out[i] = r.m
	}
	return out
}

// messagesByID reads the messages with the given ids, without payloads.
func messagesByID(ctx context.Context, tx pgx.Tx, ids []string) ([]*quarantine.Message, error) {
	out := []*quarantine.Message{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := tx.Query(ctx, "SELECT "+messageColumns+" FROM messages m WHERE m.id = ANY($1::text[])", ids)
	if err != nil {
		return nil, err
	}
	var r messageRow
	_, err = pgx.ForEachRow(rows, r.dest(), func() error {
		m, err := r.message()
		if err != nil {
			return err
		}
		out = append(out, m)
		r = messageRow{}
		return nil
	})
	return out, err
}

// strataColumn is the column of a stratification.
func strataColumn(by string) string {
	if by == quarantine.StratifyQueue {
		return "queue"
	}
	return "fingerprint"
}

// groupSizes returns the size of every group of the messages matching f:
// from the maintained tables when they answer f, otherwise by grouping.
func groupSizes(ctx context.Context, tx pgx.Tx, f *quarantine.Filter, col string) ([]sampling.Group, error) {
	var q string
	var args []any
	switch {
	case col == "fingerprint" && groupable(f):
		w := groupsWhere(f)
		q, args = "SELECT m.fingerprint, sum(m.n)::bigint FROM failure_groups m"+w.sql()+" GROUP BY 1", w.args
	case col == "queue" && groupable(f):
		q, args = statsQuery(f)
		q = "SELECT queue, sum(sum)::bigint FROM (" + q + ") c(queue, status, sum) GROUP BY 1"
	default:
		w := filterWhere(f)
		q, args = "SELECT m."+col+", count(*) FROM messages m"+w.sql()+" GROUP BY 1", w.args
	}
	rows, err := tx.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (sampling.Group, error) {
		var g sampling.Group
		err := row.Scan(&g.Key, &g.Size)
		return g, err
	})
}

// sampleStratified samples size messages matching f with every group of
// col represented (as far as size allows).
func (s *Store) sampleStratified(ctx context.Context, tx pgx.Tx, f *quarantine.Filter, by string, size int, seed int64) ([]*quarantine.Message, error) {
	col := strataColumn(by)
	groups, err := groupSizes(ctx, tx, f, col)
	if err != nil {
		return nil, err
	}
	var total int64
	for _, g := range groups {
		total += g.Size
	}
	if total <= int64(s.exact) {
		members, err := readMembers(ctx, tx, f, col, nil)
		if err != nil {
			return nil, err
		}
		return messagesByID(ctx, tx, sampling.Stratify(members, size, seed))
	}
	alloc := sampling.Allocate(groups, size, seed)
	small := sampling.SmallGroups(groups, alloc, s.smallGroup, s.exact)
	want := map[string]int{} // groups sampled by arcs, and how many each
	for _, g := range groups {
		if k := alloc[g.Key]; k > 0 && !slices.Contains(small, g.Key) {
			want[g.Key] = k
		}
	}
	out, err := groupArcs(ctx, tx, f, col, want, sampling.Offset(seed))
	if err != nil {
		return nil, err
	}
	if len(small) > 0 {
		members, err := readMembers(ctx, tx, f, col, small)
		if err != nil {
			return nil, err
		}
		ms, err := messagesByID(ctx, tx, sampling.Take(members, alloc, seed))
		if err != nil {
			return nil, err
		}
		out = append(out, ms...)
	}
	return out, nil
}

// groupArcs reads, for each group key of want, the arc of want[key]
// messages from off in that group, wrapping around: every group in one
// query (two when some arc wraps), each through the index of its key.
func groupArcs(ctx context.Context, tx pgx.Tx, f *quarantine.Filter, col string, want map[string]int, off int64) ([]*quarantine.Message, error) {
	var out []*quarantine.Message
	for _, op := range []string{">=", "<"} {
		var keys []string
		var ks []int32
		for key, k := range want {
			if k > 0 {
				keys, ks = append(keys, key), append(ks, int32(k))
			}
		}
		if len(keys) == 0 {
			break
		}
		w := filterWhere(f)
		a := w.arg(keys)
		b := w.arg(ks)
		w.conds = append(w.conds, "m."+col+" = a.g", "m.sample_rank "+op+" "+w.arg(off))
		q := "SELECT s.* FROM unnest(" + a + "::text[], " + b + "::int[]) AS a(g, k) CROSS JOIN LATERAL (SELECT " +
			messageColumns + ", m.sample_rank FROM messages m" + w.sql() + " ORDER BY m.sample_rank, m.id LIMIT a.k) s"
		rs, err := queryRanked(ctx, tx, q, w.args)
		if err != nil {
			return nil, err
		}
		for _, r := range rs {
			out = append(out, r.m)
			if col == "queue" {
				want[r.m.Queue]--
			} else {
				want[r.m.Fingerprint]--
			}
		}
	}
	return out, nil
}

// readMembers returns the id and group key of every message matching f
// (of the groups keys only, when keys is not nil).
func readMembers(ctx context.Context, tx pgx.Tx, f *quarantine.Filter, col string, keys []string) ([]sampling.Member, error) {
	w := filterWhere(f)
	if keys != nil {
		w.conds = append(w.conds, "m."+col+" = ANY("+w.arg(keys)+"::text[])")
	}
	rows, err := tx.Query(ctx, "SELECT m.id, m."+col+" FROM messages m"+w.sql(), w.args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (sampling.Member, error) {
		var m sampling.Member
		err := row.Scan(&m.ID, &m.Key)
		return m, err
	})
}

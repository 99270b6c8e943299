package postgres

import (
	"context"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/fields"
	"github.com/quarantine-dev/quarantine/store/internal/sampling"
)

// The SQL of a sample (shared.Methods.Sample; see package sampling for
// the rules). Arcs are read through messages_sample_idx (sample_rank,
// id), and per fingerprint through messages_fingerprint_sample_idx,
// every group in one query (two when some arc wraps). The arc of a
// large uniform sample is read outside a transaction; the exact method
// and stratified samples read in one snapshot.

// SampleLimits are the store's sample thresholds (shared.Backend).
func (p backend) SampleLimits() sampling.Limits { return p.s.sample }

// SampleSource reads a sample of the messages matching f (shared.Backend).
func (p backend) SampleSource(f quarantine.Filter) sampling.Source {
	return sampleSource{s: p.s, f: &f}
}

// sampleSource reads a sample of the messages matching f: outside a
// transaction through the pool, or in one snapshot.
type sampleSource struct {
	s *Store
	f *quarantine.Filter
}

func (src sampleSource) Reader() sampling.Reader { return sampleReader{q: src.s.pool, f: src.f} }

func (src sampleSource) Snapshot(ctx context.Context, col string, fn func(sampling.Reader) error) error {
	return src.s.snapshot(ctx, "sample messages", func(tx pgx.Tx) error {
		return fn(sampleReader{q: tx, f: src.f, col: col})
	})
}

// sampleReader reads the set of messages matching f (grouped by column
// col) through q: the pool, or one snapshot's transaction.
type sampleReader struct {
	q   querier
	f   *quarantine.Filter
	col string
}

var (
	_ sampling.Reader    = sampleReader{}
	_ sampling.GroupArcs = sampleReader{}
)

func rankOp(wrapped bool) string {
	if wrapped {
		return "<"
	}
	return ">="
}

func (r sampleReader) ArcPart(ctx context.Context, key string, wrapped bool, off int64, k int) ([]sampling.Ranked, error) {
	col := ""
	if key != "" {
		col = r.col
	}
	q, args := arcQuery(r.f, col, key, rankOp(wrapped), off, k)
	return queryRanked(ctx, r.q, q, args)
}

// arcQuery returns the SQL of up to k messages matching f (and col = val
// when col is set) whose rank is op off, in rank order.
func arcQuery(f *quarantine.Filter, col, val, op string, off int64, k int) (string, []any) {
	w := filterWhere(f)
	if col != "" {
		w.conds = append(w.conds, "m."+col+" = "+w.arg(val))
	}
	w.conds = append(w.conds, "m.sample_rank "+op+" "+w.arg(off))
	return "SELECT " + messageColumns + ", m.sample_rank FROM messages m" + w.sql() +
		" ORDER BY m.sample_rank, m.id LIMIT " + w.arg(k), w.args
}

// GroupArcParts reads every group's part in one query, each through the
// index of its key (a lateral subquery per group).
func (r sampleReader) GroupArcParts(ctx context.Context, want map[string]int, wrapped bool, off int64) ([]sampling.Ranked, error) {
	keys := make([]string, 0, len(want))
	ks := make([]int32, 0, len(want))
	for key, k := range want {
		keys, ks = append(keys, key), append(ks, int32(k))
	}
	w := filterWhere(r.f)
	a, b := w.arg(keys), w.arg(ks)
	w.conds = append(w.conds, "m."+r.col+" = a.g", "m.sample_rank "+rankOp(wrapped)+" "+w.arg(off))
	return queryRanked(ctx, r.q, "SELECT s.* FROM unnest("+a+"::text[], "+b+"::int[]) AS a(g, k) CROSS JOIN LATERAL (SELECT "+
		messageColumns+", m.sample_rank FROM messages m"+w.sql()+" ORDER BY m.sample_rank, m.id LIMIT a.k) s", w.args)
}

func queryRanked(ctx context.Context, q querier, sql string, args []any) ([]sampling.Ranked, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	var out []sampling.Ranked
	var r messageRow
	var rank int64
	_, err = pgx.ForEachRow(rows, append(r.dest(), &rank), func() error {
		m, err := r.message()
		if err != nil {
			return err
		}
		out = append(out, sampling.Ranked{M: m, Rank: rank})
		r = messageRow{}
		return nil
	})
	return out, err
}

func (r sampleReader) IDs(ctx context.Context, limit int) ([]string, error) {
	w := filterWhere(r.f)
	rows, err := r.q.Query(ctx, "SELECT m.id FROM messages m"+w.sql()+" LIMIT "+strconv.Itoa(limit), w.args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// ByID reads the messages with the given ids, without payloads.
func (r sampleReader) ByID(ctx context.Context, ids []string) ([]*quarantine.Message, error) {
	out := []*quarantine.Message{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := r.q.Query(ctx, "SELECT "+messageColumns+" FROM messages m WHERE m.id = ANY($1::text[])", ids)
	if err != nil {
		return nil, err
	}
	var mr messageRow
	_, err = pgx.ForEachRow(rows, mr.dest(), func() error {
		m, err := mr.message()
		if err != nil {
			return err
		}
		out = append(out, m)
		mr = messageRow{}
		return nil
	})
	return out, err
}

// Groups returns the size of every group of the set: from the maintained
// tables when they answer the filter, otherwise by grouping.
func (r sampleReader) Groups(ctx context.Context) ([]sampling.Group, error) {
	var q string
	var args []any
	switch {
	case r.col == "fingerprint" && fields.Groupable(r.f):
		w := groupsWhere(r.f)
		q, args = "SELECT m.fingerprint, sum(m.n)::bigint FROM failure_groups m"+w.sql()+" GROUP BY 1", w.args
	case r.col == "queue" && fields.Groupable(r.f):
		q, args = statsQuery(r.f)
		q = "SELECT queue, sum(sum)::bigint FROM (" + q + ") c(queue, status, sum) GROUP BY 1"
	default:
		w := filterWhere(r.f)
		q, args = "SELECT m."+r.col+", count(*) FROM messages m"+w.sql()+" GROUP BY 1", w.args
	}
	rows, err := r.q.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (sampling.Group, error) {
		var g sampling.Group
		err := row.Scan(&g.Key, &g.Size)
		return g, err
	})
}

func (r sampleReader) Members(ctx context.Context, keys []string) ([]sampling.Member, error) {
	w := filterWhere(r.f)
	if keys != nil {
		w.conds = append(w.conds, "m."+r.col+" = ANY("+w.arg(keys)+"::text[])")
	}
	rows, err := r.q.Query(ctx, "SELECT m.id, m."+r.col+" FROM messages m"+w.sql(), w.args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (sampling.Member, error) {
		var m sampling.Member
		err := row.Scan(&m.ID, &m.Key)
		return m, err
	})
}

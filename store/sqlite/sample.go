package sqlite

import (
	"context"
	"database/sql"
	"slices"
	"strconv"
	"strings"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/sampling"
)

// Sample returns a random sample of the messages matching r.Filter,
// ordered newest first like a list; see store.Store and package sampling
// for the rules; this file holds the SQL. A set is read through
// messages_sample (sample_rank, id) for arcs, messages_fingerprint_sample
// for the arcs of fingerprints, and failure_groups for group sizes when
// it answers the filter. The arc of a large uniform sample is read
// outside a transaction (one statement, or two when the arc wraps,
// as PostgreSQL's store does); the exact method and stratified samples
// read in one snapshot. Errors: EINVALID naming the field, EUNAVAILABLE.
func (s *Store) Sample(ctx context.Context, r quarantine.SampleRequest) ([]*quarantine.Message, error) {
	f, err := sampling.Filter(&r)
	if err != nil {
		return nil, err
	}
	if err := s.searchReady(ctx, f.Text); err != nil {
		return nil, err
	}
	lim := sampling.Limits{Exact: s.exact, SmallGroup: s.smallGroup}
	var out []*quarantine.Message
	if r.StratifyBy == quarantine.StratifyNone {
		exact := func(fn func(sampling.Reader) error) error {
			return s.read(ctx, "sample messages", func(tx *sql.Tx) error { return fn(sampleReader{q: tx, f: f}) })
		}
		out, err = sampling.Uniform(ctx, sampleReader{q: s.r, f: f}, exact, lim, r.Size, r.Seed)
		if err != nil {
			return nil, translate(err, "sample messages")
		}
		return sampling.Order(out), nil
	}
	err = s.read(ctx, "sample messages", func(tx *sql.Tx) error {
		var err error
		col := sampling.Column(r.StratifyBy)
		out, err = sampling.Stratified(ctx, sampleReader{q: tx, f: f, col: col}, col, lim, r.Size, r.Seed)
		return err
	})
	if err != nil {
		return nil, err
	}
	return sampling.Order(out), nil
}

// querier is what a sampleReader reads through: the read connections,
// or one read transaction.
type querier interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

// sampleReader reads the set of messages matching f (grouped by column
// col) through q.
type sampleReader struct {
	q   querier
	f   quarantine.Filter
	col string
}

var (
	_ sampling.Reader    = sampleReader{}
	_ sampling.GroupArcs = sampleReader{}
)

// and adds cond to the WHERE clause w made by where.
func and(w, cond string) string {
	if w == "" {
		return " WHERE " + cond
	}
	return w + " AND " + cond
}

func (r sampleReader) ArcPart(ctx context.Context, key string, wrapped bool, off int64, k int) ([]sampling.Ranked, error) {
	q, args := r.arcQuery(key, wrapped, off, k)
	return r.queryRanked(ctx, q, args)
}

// arcQuery is the SQL of ArcPart.
func (r sampleReader) arcQuery(key string, wrapped bool, off int64, k int) (string, []any) {
	w, args := where(r.f, false)
	if key != "" {
		w = and(w, "m."+r.col+" = ?")
		args = append(args, key)
	}
	op := ">="
	if wrapped {
		op = "<"
	}
	w = and(w, "m.sample_rank "+op+" ?")
	args = append(args, off, k)
	return "SELECT " + messageColumns + ", m.sample_rank FROM messages m" + w +
		" ORDER BY m.sample_rank, m.id LIMIT ?", args
}

// groupArcsAtOnce is how many groups' arcs one compound query reads
// (SQLite allows 500 terms in a compound SELECT and 32766 bound values).
const groupArcsAtOnce = 100

// GroupArcParts reads the groups' parts in compound queries (UNION ALL of
// each group's ArcPart, each through the index of its key), sparing a
// statement per group.
func (r sampleReader) GroupArcParts(ctx context.Context, want map[string]int, wrapped bool, off int64) ([]sampling.Ranked, error) {
	keys := make([]string, 0, len(want))
	for key := range want {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	var out []sampling.Ranked
	for part := range slices.Chunk(keys, groupArcsAtOnce) {
		var q strings.Builder
		var args []any
		for i, key := range part {
			sub, a := r.arcQuery(key, wrapped, off, want[key])
			if i > 0 {
				q.WriteString(" UNION ALL ")
			}
			q.WriteString("SELECT * FROM (" + sub + ")")
			args = append(args, a...)
		}
		rs, err := r.queryRanked(ctx, q.String(), args)
		if err != nil {
			return nil, err
		}
		out = append(out, rs...)
	}
	return out, nil
}

func (r sampleReader) queryRanked(ctx context.Context, q string, args []any) ([]sampling.Ranked, error) {
	rows, err := r.q.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []sampling.Ranked
	for rows.Next() {
		var rank int64
		m, err := scanMessage(rows, &rank)
		if err != nil {
			return nil, err
		}
		out = append(out, sampling.Ranked{M: m, Rank: rank})
	}
	return out, rows.Err()
}

func (r sampleReader) IDs(ctx context.Context, limit int) ([]string, error) {
	w, args := where(r.f, false)
	return queryStrings(ctx, r.q, "SELECT m.id FROM messages m"+w+" LIMIT "+strconv.Itoa(limit), args)
}

func (r sampleReader) ByID(ctx context.Context, ids []string) ([]*quarantine.Message, error) {
	return messagesByID(ctx, r.q, ids)
}

func (r sampleReader) Groups(ctx context.Context) ([]sampling.Group, error) {
	var q string
	var args []any
	if groupable(r.f) {
		w, a := groupsWhere(r.f)
		q, args = "SELECT g."+r.col+", sum(g.n) FROM failure_groups g"+w+" GROUP BY 1", a
	} else {
		w, a := where(r.f, false)
		q, args = "SELECT m."+r.col+", count(*) FROM messages m"+w+" GROUP BY 1", a
	}
	rows, err := r.q.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []sampling.Group
	for rows.Next() {
		var g sampling.Group
		if err := rows.Scan(&g.Key, &g.Size); err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, rows.Err()
}

func (r sampleReader) Members(ctx context.Context, keys []string) ([]sampling.Member, error) {
	w, args := where(r.f, false)
	if keys != nil {
		w = and(w, "m."+r.col+" IN (SELECT value FROM json_each(?))")
		args = append(args, jsonArray(keys))
	}
	rows, err := r.q.QueryContext(ctx, "SELECT m.id, m."+r.col+" FROM messages m"+w, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []sampling.Member
	for rows.Next() {
		var m sampling.Member
		if err := rows.Scan(&m.ID, &m.Key); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

func queryStrings(ctx context.Context, tx querier, q string, args []any) ([]string, error) {
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// messagesByID reads the messages with the given ids, without payloads.
func messagesByID(ctx context.Context, tx querier, ids []string) ([]*quarantine.Message, error) {
	out := []*quarantine.Message{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := tx.QueryContext(ctx, "SELECT "+messageColumns+" FROM messages m WHERE m.id IN (SELECT value FROM json_each(?))", jsonArray(ids))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		m, err := scanMessage(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

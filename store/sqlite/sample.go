package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/fields"
	"github.com/quarantine-dev/quarantine/store/internal/sampling"
)

// The SQL of a sample (shared.Methods.Sample; see package sampling for
// the rules). The arcs of a set are read from sample_ranks
// (sample_rank, id), or fingerprint_ranks for the arcs of
// fingerprints, merged with the messages not yet in them (those still
// queued in search_pending: sideArc and pendingArc), and group sizes
// from failure_groups when it answers the filter. The arc of a large
// uniform sample is read outside a transaction (one statement, or two
// when the arc wraps, as PostgreSQL's store does); the exact method
// and stratified samples read in one snapshot.

// SampleLimits are the store's sample thresholds (shared.Backend).
func (p backend) SampleLimits() sampling.Limits { return p.s.sample }

// SampleSource reads a sample of the messages matching f (shared.Backend).
func (p backend) SampleSource(f quarantine.Filter) sampling.Source { return sampleSource{s: p.s, f: f} }

// sampleSource reads a sample of the messages matching f: outside a
// transaction through the read connections' prepared statements, or in
// one read transaction.
type sampleSource struct {
	s *Store
	f quarantine.Filter
}

func (src sampleSource) Reader() sampling.Reader {
	return sampleReader{q: cachedQuerier{src.s}, f: src.f, prefix: src.s.pendingPrefix}
}

func (src sampleSource) Snapshot(ctx context.Context, col string, fn func(sampling.Reader) error) error {
	return src.s.read(ctx, "sample messages", func(tx *sql.Tx) error {
		return fn(sampleReader{q: tx, f: src.f, col: col, prefix: src.s.pendingPrefix})
	})
}

// querier is what a sampleReader reads through: the read connections
// (with the store's prepared statements: cachedQuerier), or one read
// transaction.
type querier interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

// sampleReader reads the set of messages matching f (grouped by column
// col) through q.
type sampleReader struct {
	q   querier
	f   quarantine.Filter
	col string
	// prefix is how many of the queue's entries of an arc a filtered
	// arc reads first; 0: max(pendingPrefix, 20 × the messages asked for).
	prefix int
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
	rs, err := r.queryRanked(ctx, q, args)
	if err != nil {
		return nil, err
	}
	return firstRanked(rs, k), nil
}

// arcQuery is the SQL of ArcPart: one statement, so one snapshot (a
// message the indexer moves from search_pending to the side tables
// meanwhile is in one half or the other). The halves give keys; only the
// k that win read their rows.
func (r sampleReader) arcQuery(key string, wrapped bool, off int64, k int) (string, []any) {
	side, args := r.sideArc(key, wrapped, off, k)
	pending, a := r.pendingArc(key, wrapped, off, k)
	return "SELECT " + messageColumns + ", u.sample_rank FROM (" + side + " UNION " + pending +
		" ORDER BY 1, 2 LIMIT ?) u CROSS JOIN messages m ON m.id = u.id", append(append(args, a...), k)
}

// The arc of a set is read from two halves (migration 0013): the side
// index (sample_ranks, or fingerprint_ranks for a group of fingerprints),
// which holds the messages the search indexer has taken, and the
// messages still queued for it in search_pending, which may not be there
// yet. Each half gives the (rank, id) of its first k in that order; the
// first k of their union are among those (a message edited after it was
// indexed is in both: UNION, and firstRanked, keep one).

// sideArc is the SQL of the keys (sample_rank, id) of the first k
// messages of the arc in the side index: a compound SELECT's term.
func (r sampleReader) sideArc(key string, wrapped bool, off int64, k int) (string, []any) {
	w, args := where(r.f, false)
	table := "sample_ranks"
	join := w != "" // the filter reads the message
	if key != "" {
		if r.col == "fingerprint" {
			table = "fingerprint_ranks"
			w = and(w, "x.fingerprint = ?")
		} else {
			join = true
			w = and(w, "m."+r.col+" = ?")
		}
		args = append(args, key)
	}
	from := table + " x"
	if join {
		from += " JOIN messages m ON m.id = x.id"
	}
	w = and(w, "x.sample_rank "+rankOp(wrapped)+" ?")
	args = append(args, off, k)
	return "SELECT * FROM (SELECT x.sample_rank, x.id FROM " + from + w +
		" ORDER BY x.sample_rank, x.id LIMIT ?)", args
}

// pendingArc is the SQL of the keys of the first k messages of the arc
// queued for the search index: a compound SELECT's term. Only a new
// message's entry has a rank (an edit's entry has none: its message is
// ranked, or its insert entry is still queued), so each message is read
// once, and the queue's narrow rows alone give the arc of an unfiltered
// set; a filter looks the entries' messages up by id, in rank order, for
// a prefix of the entries first, which is cheaper than looking up every
// entry's message or reading every queued message for its rank
// (docs/benchmarks.md). The queue has no index of ranks: one cost ingest
// a fifth of its rate.
func (r sampleReader) pendingArc(key string, wrapped bool, off int64, k int) (string, []any) {
	w, fargs := where(r.f, false)
	if key != "" {
		w = and(w, "m."+r.col+" = ?")
		fargs = append(fargs, key)
	}
	if w == "" {
		return "SELECT * FROM (SELECT sample_rank, message_id FROM search_pending WHERE sample_rank IS NOT NULL AND sample_rank " +
			rankOp(wrapped) + " ? ORDER BY 1, 2 LIMIT ?)", []any{off, k}
	}
	// The first pendingPrefix entries of the arc, and of those the first
	// k that pass the filter; only when fewer pass and there are more
	// entries, the first k that pass among the rest (after the prefix's
	// last key). Either way the first k of the term are the arc's.
	op := rankOp(wrapped)
	pre := r.prefix
	if pre <= 0 {
		pre = max(pendingPrefix, 20*k)
	}
	arc := func(t string) string { return t + "sample_rank IS NOT NULL AND " + t + "sample_rank " + op + " ?" }
	q := "SELECT * FROM (WITH pre AS MATERIALIZED (SELECT sample_rank, message_id FROM search_pending WHERE " + arc("") +
		" ORDER BY 1, 2 LIMIT ?), hit AS MATERIALIZED (SELECT p.sample_rank, p.message_id FROM pre p CROSS JOIN messages m ON m.id = p.message_id" +
		w + " ORDER BY 1, 2 LIMIT ?) SELECT * FROM hit UNION ALL SELECT * FROM (SELECT p.sample_rank, p.message_id FROM " + pendingMessages +
		and(w, "(SELECT count(*) FROM hit) < ? AND (SELECT count(*) FROM pre) = ? AND "+arc("p.")+
			" AND (p.sample_rank, p.message_id) > (SELECT sample_rank, message_id FROM pre ORDER BY 1 DESC, 2 DESC LIMIT 1)") +
		" ORDER BY 1, 2 LIMIT ?))"
	args := []any{off, pre}
	args = append(args, fargs...)
	args = append(args, k)
	args = append(args, fargs...)
	args = append(args, k, pre, off, k)
	return q, args
}

// pendingPrefix is how many of the queue's entries of an arc a filtered
// arc reads first (at least 20 per message asked for): sorting the
// queue's narrow rows by rank costs less than looking every queued
// message up. The conformance suite lowers it (SetSampleExact), so that
// its samples read past the prefix too.
const pendingPrefix = 4096

// pendingMessages is the FROM clause of the messages queued for the
// search index with their entries. CROSS JOIN makes SQLite read the
// queue first and look each message up by id: a filter's index
// (messages_status, say) would otherwise drive, reading every message of
// the filter to test it against the queue.
const pendingMessages = "search_pending p CROSS JOIN messages m ON m.id = p.message_id"

// rankOp is the comparison of a rank with the offset of an arc's part.
func rankOp(wrapped bool) string {
	if wrapped {
		return "<"
	}
	return ">="
}

// firstRanked returns the first k distinct messages of rs in (rank, id)
// order.
func firstRanked(rs []sampling.Ranked, k int) []sampling.Ranked {
	slices.SortFunc(rs, func(a, b sampling.Ranked) int {
		return cmp.Or(cmp.Compare(a.Rank, b.Rank), cmp.Compare(a.M.ID, b.M.ID))
	})
	rs = slices.CompactFunc(rs, func(a, b sampling.Ranked) bool { return a.M.ID == b.M.ID })
	return rs[:min(k, len(rs))]
}

// groupArcsAtOnce is how many groups' arcs one compound query reads
// (SQLite allows 500 terms in a compound SELECT and 32766 bound values).
const groupArcsAtOnce = 100

// GroupArcParts reads the groups' parts from the side index in compound
// queries (UNION ALL of each group's sideArc, each through the key of
// its table, then the rows of the keys they gave), sparing a statement
// per group, and the pending half of every group in one more query (the
// first want[key] of each group, by a window), then merges them group by
// group. Stratified calls it in one read transaction, so the statements
// see one snapshot.
func (r sampleReader) GroupArcParts(ctx context.Context, want map[string]int, wrapped bool, off int64) ([]sampling.Ranked, error) {
	keys := make([]string, 0, len(want))
	for key := range want {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	var all []sampling.Ranked
	for part := range slices.Chunk(keys, groupArcsAtOnce) {
		var q strings.Builder
		var args []any
		q.WriteString("SELECT " + messageColumns + ", u.sample_rank FROM (")
		for i, key := range part {
			sub, a := r.sideArc(key, wrapped, off, want[key])
			if i > 0 {
				q.WriteString(" UNION ALL ")
			}
			q.WriteString(sub)
			args = append(args, a...)
		}
		q.WriteString(") u CROSS JOIN messages m ON m.id = u.id")
		rs, err := r.queryRanked(ctx, q.String(), args)
		if err != nil {
			return nil, err
		}
		all = append(all, rs...)
	}
	pending, err := r.pendingGroupArcs(ctx, want, wrapped, off)
	if err != nil {
		return nil, err
	}
	all = append(all, pending...)
	byKey := map[string][]sampling.Ranked{}
	for _, x := range all {
		k := r.keyOf(x.M)
		byKey[k] = append(byKey[k], x)
	}
	var out []sampling.Ranked
	for _, key := range keys {
		out = append(out, firstRanked(byKey[key], want[key])...)
	}
	return out, nil
}

// pendingGroupArcs reads the pending half of GroupArcParts: of each
// group of want, the first want[key] messages of the arc queued for the
// search index.
func (r sampleReader) pendingGroupArcs(ctx context.Context, want map[string]int, wrapped bool, off int64) ([]sampling.Ranked, error) {
	wants, err := json.Marshal(want)
	if err != nil {
		return nil, err
	}
	w, args := where(r.f, false)
	w = and(w, "p.sample_rank IS NOT NULL AND p.sample_rank "+rankOp(wrapped)+" ?")
	w = and(w, "m."+r.col+" IN (SELECT key FROM json_each(?))")
	args = append(args, off, string(wants), string(wants))
	q := "SELECT " + messageColumns + ", m.sample_rank FROM (SELECT m.*, row_number() OVER (PARTITION BY m." + r.col +
		" ORDER BY p.sample_rank, p.message_id) AS n FROM " + pendingMessages + w + ") m" +
		" JOIN json_each(?) j ON j.key = m." + r.col + " WHERE m.n <= j.value"
	return r.queryRanked(ctx, q, args)
}

// keyOf is m's key in the groups of r.col.
func (r sampleReader) keyOf(m *quarantine.Message) string {
	if r.col == "queue" {
		return m.Queue
	}
	return m.Fingerprint
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
	if fields.Groupable(&r.f) {
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
	if len(ids) == 0 {
		return []*quarantine.Message{}, nil
	}
	return queryAll(ctx, tx, scanMessageRow, "SELECT "+messageColumns+" FROM messages m WHERE m.id IN (SELECT value FROM json_each(?))", jsonArray(ids))
}

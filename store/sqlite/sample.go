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

// Sampling works as in the PostgreSQL store (see package sampling): a set
// of at most s.exact messages is sampled exactly from its ids; a larger
// one by rank, reading the arc of messages_sample (sample_rank, id) after
// the seed's offset; a stratified sample takes one arc per group (through
// messages_fingerprint_sample for fingerprints), or reads the members of
// groups of at most s.smallGroup messages. Group sizes come from
// failure_groups when it answers the filter.

// and adds cond to the WHERE clause w made by where.
func and(w, cond string) string {
	if w == "" {
		return " WHERE " + cond
	}
	return w + " AND " + cond
}

// rankedMessage is a message read with its rank.
type rankedMessage struct {
	m    *quarantine.Message
	rank int64
}

// Sample returns a random sample of the messages matching r.Filter,
// ordered newest first like a list; see store.Store. All reads share one
// snapshot. Errors: EINVALID naming the field, EUNAVAILABLE.
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
	err := s.read(ctx, "sample messages", func(tx *sql.Tx) error {
		var err error
		if r.StratifyBy == quarantine.StratifyNone {
			out, err = s.sampleUniform(ctx, tx, f, r.Size, r.Seed)
		} else {
			out, err = s.sampleStratified(ctx, tx, f, r.StratifyBy, r.Size, r.Seed)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b *quarantine.Message) int {
		if c := b.FailedAt.Compare(a.FailedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	if out == nil {
		out = []*quarantine.Message{}
	}
	return out, nil
}

func (s *Store) sampleUniform(ctx context.Context, tx *sql.Tx, f quarantine.Filter, k int, seed int64) ([]*quarantine.Message, error) {
	off := sampling.Offset(seed)
	arc, err := readArc(ctx, tx, f, "", "", off, k)
	if err != nil {
		return nil, err
	}
	if len(arc) < k || sampling.EstimateSize(k, sampling.Span(off, arc[k-1].rank)) > 2*float64(s.exact) {
		return messagesOf(arc), nil
	}
	w, args := where(f, false)
	ids, err := queryStrings(ctx, tx, "SELECT m.id FROM messages m"+w+" LIMIT "+strconv.Itoa(s.exact+1), args)
	if err != nil {
		return nil, err
	}
	if len(ids) > s.exact {
		return messagesOf(arc), nil
	}
	return messagesByID(ctx, tx, sampling.Pick(ids, k, seed))
}

// readArc returns up to k messages matching f (and key col = val when col
// is set) in rank order from off, wrapping around to rank 0.
func readArc(ctx context.Context, tx *sql.Tx, f quarantine.Filter, col, val string, off int64, k int) ([]rankedMessage, error) {
	out, err := arcPart(ctx, tx, f, col, val, ">=", off, k)
	if err != nil || len(out) == k {
		return out, err
	}
	rest, err := arcPart(ctx, tx, f, col, val, "<", off, k-len(out))
	return append(out, rest...), err
}

func arcPart(ctx context.Context, tx *sql.Tx, f quarantine.Filter, col, val, op string, off int64, k int) ([]rankedMessage, error) {
	w, args := where(f, false)
	if col != "" {
		w = and(w, "m."+col+" = ?")
		args = append(args, val)
	}
	w = and(w, "m.sample_rank "+op+" ?")
	args = append(args, off, k)
	rows, err := tx.QueryContext(ctx, "SELECT "+messageColumns+", m.sample_rank FROM messages m"+w+
		" ORDER BY m.sample_rank, m.id LIMIT ?", args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []rankedMessage
	for rows.Next() {
		var rank int64
		m, err := scanMessage(rows, &rank)
		if err != nil {
			return nil, err
		}
		out = append(out, rankedMessage{m, rank})
	}
	return out, rows.Err()
}

func messagesOf(rs []rankedMessage) []*quarantine.Message {
	out := make([]*quarantine.Message, len(rs))
	for i, r := range rs {
		out[i] = r.m
	}
	return out
}

func queryStrings(ctx context.Context, tx *sql.Tx, q string, args []any) ([]string, error) {
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
func messagesByID(ctx context.Context, tx *sql.Tx, ids []string) ([]*quarantine.Message, error) {
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

func strataColumn(by string) string {
	if by == quarantine.StratifyQueue {
		return "queue"
	}
	return "fingerprint"
}

func (s *Store) sampleStratified(ctx context.Context, tx *sql.Tx, f quarantine.Filter, by string, size int, seed int64) ([]*quarantine.Message, error) {
	col := strataColumn(by)
	var q string
	var args []any
	if groupable(f) {
		w, a := groupsWhere(f)
		q, args = "SELECT g."+col+", sum(g.n) FROM failure_groups g"+w+" GROUP BY 1", a
	} else {
		w, a := where(f, false)
		q, args = "SELECT m."+col+", count(*) FROM messages m"+w+" GROUP BY 1", a
	}
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	var groups []sampling.Group
	var total int64
	for rows.Next() {
		var g sampling.Group
		if err := rows.Scan(&g.Key, &g.Size); err != nil {
			rows.Close()
			return nil, err
		}
		groups = append(groups, g)
		total += g.Size
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if total <= int64(s.exact) {
		members, err := readMembers(ctx, tx, f, col, nil)
		if err != nil {
			return nil, err
		}
		return messagesByID(ctx, tx, sampling.Stratify(members, size, seed))
	}
	alloc := sampling.Allocate(groups, size, seed)
	off := sampling.Offset(seed)
	small := sampling.SmallGroups(groups, alloc, s.smallGroup, s.exact)
	var out []*quarantine.Message
	for _, g := range groups {
		if k := alloc[g.Key]; k > 0 && !slices.Contains(small, g.Key) {
			arc, err := readArc(ctx, tx, f, col, g.Key, off, k)
			if err != nil {
				return nil, err
			}
			out = append(out, messagesOf(arc)...)
		}
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

// readMembers returns the id and group key of every message matching f
// (of the groups keys only, when keys is not nil).
func readMembers(ctx context.Context, tx *sql.Tx, f quarantine.Filter, col string, keys []string) ([]sampling.Member, error) {
	w, args := where(f, false)
	if keys != nil {
		w = and(w, "m."+col+" IN (SELECT value FROM json_each(?))")
		args = append(args, jsonArray(keys))
	}
	rows, err := tx.QueryContext(ctx, "SELECT m.id, m."+col+" FROM messages m"+w, args...)
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

package postgres

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/fields"
)

// where builds the WHERE clause of a message query, with numbered
// parameters. Every value is a parameter, never spliced into the SQL.
type where struct {
	conds []string
	args  []any
}

// arg adds v as the next parameter and returns its placeholder.
func (w *where) arg(v any) string {
	w.args = append(w.args, v)
	return "$" + strconv.Itoa(len(w.args))
}

// in filters col by the alternatives vals. One value is a plain equality,
// which the planner can serve in index order; several are = ANY.
func (w *where) in(col string, vals []string) {
	switch len(vals) {
	case 0:
	case 1:
		w.conds = append(w.conds, col+" = "+w.arg(vals[0]))
	default:
		w.conds = append(w.conds, col+" = ANY("+w.arg(vals)+"::text[])")
	}
}

// eqs adds the conditions eqs: on the columns named in literals (closed
// sets of values: statuses, failure classes) with the values written as
// literals, on the others with bound values.
func (w *where) eqs(eqs []fields.Eq, literals ...string) {
	for _, e := range eqs {
		if slices.Contains(literals, e.Column) {
			w.literals(e.Column, e.Values)
		} else {
			w.in(e.Column, e.Values)
		}
	}
}

// literals filters col by validated enum values (statuses, failure
// classes) written as SQL literals, so that the planner can match partial
// indexes such as messages_status_idx (WHERE status <> 'quarantined').
// Quotes are doubled all the same.
func (w *where) literals(col string, vals []string) {
	quoted := make([]string, len(vals))
	for i, v := range vals {
		quoted[i] = "'" + strings.ReplaceAll(v, "'", "''") + "'"
	}
	switch len(vals) {
	case 0:
	case 1:
		w.conds = append(w.conds, col+" = "+quoted[0])
	default:
		w.conds = append(w.conds, col+" IN ("+strings.Join(quoted, ", ")+")")
	}
}

func (w *where) sql() string {
	if len(w.conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(w.conds, " AND ")
}

// filterWhere turns a validated filter into conditions on messages m,
// without its cursor.
func filterWhere(f *quarantine.Filter) *where {
	w := fieldsWhere(f)
	if f.Text != "" {
		w.conds = append(w.conds, textCond(w, f.Text))
	}
	return w
}

// fieldsWhere turns the equality and time conditions of a validated
// filter into conditions on messages m: all but its text and cursor.
func fieldsWhere(f *quarantine.Filter) *where {
	w := &where{}
	w.eqs(fields.Messages(f), "m.status")
	if !f.FailedAfter.IsZero() {
		w.conds = append(w.conds, "m.failed_at >= "+w.arg(f.FailedAfter))
	}
	if !f.FailedBefore.IsZero() {
		w.conds = append(w.conds, "m.failed_at < "+w.arg(f.FailedBefore))
	}
	return w
}

// after adds the keyset condition of cursor c, if any.
func (w *where) after(c *quarantine.Cursor) {
	if c != nil {
		w.conds = append(w.conds, "(m.failed_at, m.id) < ("+w.arg(c.FailedAt)+", "+w.arg(c.ID)+")")
	}
}

// likePattern returns the ILIKE pattern matching s as a literal substring
// (backslash is ILIKE's default escape character).
func likePattern(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return "%" + r.Replace(s) + "%"
}

// listQuery returns the SQL and arguments of one page of a validated
// filter: limit+1 rows, so that a further row says there is a next page.
func listQuery(f *quarantine.Filter) (string, []any) { return pageQuery(f, false) }

// groupListMax is the number of messages up to which a list filtered by
// fingerprint reads its groups' messages through their index and sorts
// them, instead of walking every message newest first until the page is
// full. The planner cannot tell a small group from a large one (its
// statistics give every fingerprint about the average size), and the walk
// costs a read of every newer message, which an empty or small group pays
// in full (figures in docs/benchmarks.md).
const groupListMax = 5000

// pageQuery is listQuery; with fromGroups, the rows matching the filter
// are read first (a materialized CTE, through the fingerprint index), then
// sorted.
func pageQuery(f *quarantine.Filter, fromGroups bool) (string, []any) {
	w := filterWhere(f)
	w.after(f.After)
	if fromGroups {
		q := "WITH m AS MATERIALIZED (SELECT " + messageColumns + " FROM messages m" + w.sql() +
			") SELECT * FROM m ORDER BY m.failed_at DESC, m.id DESC LIMIT " + w.arg(f.Limit+1)
		return q, w.args
	}
	q := "SELECT " + messageColumns + " FROM messages m" + w.sql() +
		" ORDER BY m.failed_at DESC, m.id DESC LIMIT " + w.arg(f.Limit+1)
	return q, w.args
}

// crossesIndexes reports whether f's conditions on the fields of the
// failure groups (fields.Groups) are ones no single index of messages
// serves in list order: a fingerprint, or two fields or more other than a
// queue and a status (messages_queue_status_idx). A list of such a filter
// walks one index newest first and tests the others on each row, which
// costs a read of every row of that index when few match (a failure class
// with a rare status that matches nothing walked every message of the
// status: 346 ms at 1M, docs/postgresql.md).
func crossesIndexes(f *quarantine.Filter) bool {
	if len(f.Fingerprint) > 0 {
		return true
	}
	n := 0
	for _, e := range fields.Groups(f, "m") {
		if len(e.Values) > 0 {
			n++
		}
	}
	return n >= 2 && !(n == 2 && len(f.Queue) > 0 && len(f.Status) > 0)
}

// listRoute is how ListMessages reads a page.
type listRoute int

const (
	routeWalk   listRoute = iota // walk an index newest first (pageQuery)
	routeGroups                  // read the matching groups' messages, then sort
	routeEmpty                   // the kept counts say nothing matches
)

// groupsRouteSQL reads, from the kept counts of failure_groups, the
// fingerprints of the buckets matching a filter's group conditions, how
// many messages match them, and how many messages those fingerprints hold
// in all (what reading them through messages_fingerprint_sample_idx
// costs).
const groupsRouteSQL = `WITH hit AS (SELECT m.fingerprint, sum(m.n) AS n FROM failure_groups m%s GROUP BY m.fingerprint)
SELECT coalesce(array_agg(h.fingerprint), '{}'), coalesce(sum(h.n), 0)::bigint,
	coalesce((SELECT sum(g.n) FROM failure_groups g WHERE g.fingerprint IN (SELECT fingerprint FROM hit)), 0)::bigint
FROM hit h`

// route chooses how to list f from the kept counts (failure_groups,
// counted in the transaction of every insert and status change), when its
// group conditions cross indexes: none matching, the page is empty (the
// filter is a conjunction: its other conditions cannot add any); the
// matching groups' fingerprints holding at most groupListMax messages in
// all, f is narrowed to them and read through their index (the planner
// cannot tell a small group from a large one: its statistics give every
// fingerprint about the average size); else the walk. Text searches are
// not routed (listText).
func (s *Store) route(ctx context.Context, f *quarantine.Filter) (listRoute, error) {
	if !crossesIndexes(f) {
		return routeWalk, nil
	}
	w := groupsWhere(f)
	var fps []string
	var matched, total int64
	err := s.pool.QueryRow(ctx, fmt.Sprintf(groupsRouteSQL, w.sql()), w.args...).Scan(&fps, &matched, &total)
	if err != nil {
		return routeWalk, translate(err, "count the groups of a list")
	}
	switch {
	case matched == 0:
		return routeEmpty, nil
	case total <= groupListMax:
		f.Fingerprint = fps
		return routeGroups, nil
	}
	return routeWalk, nil
}

// ListMessages returns one page of messages, newest first; see
// store.Store. Errors: EINVALID naming the field, EUNAVAILABLE, EINTERNAL.
func (s *Store) ListMessages(ctx context.Context, f quarantine.Filter) (quarantine.MessagePage, error) {
	if err := f.Validate(); err != nil {
		return quarantine.MessagePage{}, err
	}
	var msgs []*quarantine.Message
	var err error
	if f.Text != "" {
		msgs, err = s.listText(ctx, &f)
	} else {
		g := f
		var r listRoute
		if r, err = s.route(ctx, &g); err != nil {
			return quarantine.MessagePage{}, err
		}
		msgs = []*quarantine.Message{}
		if r != routeEmpty {
			q, args := pageQuery(&g, r == routeGroups)
			msgs, err = s.queryMessages(ctx, q, args)
		}
	}
	if err != nil {
		return quarantine.MessagePage{}, err
	}
	page := quarantine.MessagePage{Messages: msgs}
	if len(msgs) > f.Limit {
		page.Messages = msgs[:f.Limit]
		page.Next = quarantine.CursorOf(page.Messages[f.Limit-1])
	}
	return page, nil
}

// queryMessages runs q, which selects messageColumns, and returns the
// messages (never nil).
func (s *Store) queryMessages(ctx context.Context, q string, args []any) ([]*quarantine.Message, error) {
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, translate(err, "list messages")
	}
	out := []*quarantine.Message{}
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
	if err != nil {
		return nil, translate(err, "list messages")
	}
	return out, nil
}

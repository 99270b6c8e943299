package postgres

import (
	"context"
	"strconv"

	"github.com/quarantine-dev/quarantine"
)

// Text search (Filter.Text) is a case-insensitive literal substring match
// (ILIKE with the metacharacters escaped) over the reason and the current
// payload, when the payload is text.
//
// There is no text index: pg_trgm GIN indexes over reasons and 1 KiB
// payloads cost inserts more than every btree index together (a payload
// holds hundreds of trigrams), and the quarantine must ingest tens of
// thousands of messages a second. Instead listText walks the candidates
// (the messages matching the other filters) newest first, in windows of
// textWindow rows read in index order, and tests each: a term that most
// messages contain fills a page after a few rows; a rare term walks window
// after window, and a term no message contains reads every candidate, so
// narrow the other filters (queue, status, time) to keep such a search
// quick on millions of messages.
const textWindow = 5000

// textTested is the per-row condition on m for ILIKE pattern p. The
// payload side matches only the current version, read by a correlated
// scalar subquery: one primary-key probe per tested row (an EXISTS could
// be planned as a hashed scan of every payload).
func textTested(p string) string {
	return `(m.reason ILIKE ` + p + ` OR (SELECT pv.payload_text ILIKE ` + p + ` FROM payload_versions pv
	WHERE pv.message_id = m.id AND pv.version = m.payload_version))`
}

// windowQuery returns the windowed plan of a validated filter with text:
// the first limit+1 matches among the newest textWindow candidates after
// f.After.
func windowQuery(f *quarantine.Filter) (string, []any) {
	w := fieldsWhere(f)
	w.after(f.After)
	inner := "SELECT m.* FROM messages m" + w.sql() +
		" ORDER BY m.failed_at DESC, m.id DESC LIMIT " + strconv.Itoa(textWindow)
	q := "SELECT " + messageColumns + " FROM (" + inner + ") m WHERE " + textTested(w.arg(likePattern(f.Text))) +
		" ORDER BY m.failed_at DESC, m.id DESC LIMIT " + w.arg(f.Limit+1)
	return q, w.args
}

// boundaryQuery returns the last candidate of the window after f.After,
// when the window is full (no row: the window held every candidate left).
func boundaryQuery(f *quarantine.Filter) (string, []any) {
	w := fieldsWhere(f)
	w.after(f.After)
	return "SELECT m.failed_at, m.id FROM messages m" + w.sql() +
		" ORDER BY m.failed_at DESC, m.id DESC OFFSET " + strconv.Itoa(textWindow-1) + " LIMIT 1", w.args
}

// listText returns up to f.Limit+1 messages matching f, which has text,
// walking window after window until the page is full or the candidates
// run out.
func (s *Store) listText(ctx context.Context, f *quarantine.Filter) ([]*quarantine.Message, error) {
	want := f.Limit + 1
	var out []*quarantine.Message
	g := *f
	for {
		g.Limit = want - len(out) - 1
		q, args := windowQuery(&g)
		msgs, err := s.queryMessages(ctx, q, args)
		if err != nil {
			return nil, err
		}
		out = append(out, msgs...)
		if len(out) >= want {
			return out[:want], nil
		}
		q, args = boundaryQuery(&g)
		var c quarantine.Cursor
		rows, err := s.pool.Query(ctx, q, args...)
		if err != nil {
			return nil, translate(err, "list messages")
		}
		more := false
		for rows.Next() {
			if err := rows.Scan(&c.FailedAt, &c.ID); err != nil {
				rows.Close()
				return nil, translate(err, "list messages")
			}
			more = true
		}
		if err := rows.Err(); err != nil {
			return nil, translate(err, "list messages")
		}
		if !more {
			return out, nil // the window held every candidate: the answer is complete
		}
		c.FailedAt = c.FailedAt.UTC()
		g.After = &c
	}
}

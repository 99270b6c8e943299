package postgres

import (
	"context"
	"strconv"

	"github.com/quarantine-dev/quarantine"
)

// Text search (Filter.Text) is a case-insensitive literal substring match
// (ILIKE with the metacharacters escaped) over the reason and the current
// payload, when the payload is text. Two plans answer it, and neither is
// good for every term:
//
//   - indexed: the pg_trgm GIN indexes find every matching message, which
//     is then sorted. Fast for a rare term (an order id), slow for a term
//     that most messages contain: all of them are fetched and sorted.
//   - windowed: walk the newest messages matching the other filters in
//     (failed_at, id) order and test each. Fast for a common term, since a
//     page fills after a few rows; a rare term would walk the whole table.
//
// listText tries the window first, bounded to textWindow rows, and falls
// back to the indexed plan only when the window neither filled the page
// nor held every candidate. A term matching more than about one message
// in textWindow/limit is answered by the window; a rarer one has few
// enough matches for the indexes to fetch and sort them all.
const textWindow = 5000

// textIndexed is the indexed condition on m for ILIKE pattern p: a union,
// so that each side can use its trigram index. The payload side matches
// only the current version.
func textIndexed(p string) string {
	return `m.id IN (
	SELECT r.id FROM messages r WHERE r.reason ILIKE ` + p + `
	UNION ALL
	SELECT c.id FROM payload_versions pv
	JOIN messages c ON c.id = pv.message_id AND c.payload_version = pv.version
	WHERE pv.payload_text ILIKE ` + p + `)`
}

// textTested is the per-row condition on m for ILIKE pattern p.
func textTested(p string) string {
	return `(m.reason ILIKE ` + p + ` OR EXISTS (SELECT 1 FROM payload_versions pv
	WHERE pv.message_id = m.id AND pv.version = m.payload_version AND pv.payload_text ILIKE ` + p + `))`
}

// windowQuery returns the windowed plan of a validated filter with text:
// the first limit+1 matches among the newest textWindow candidates.
func windowQuery(f *quarantine.Filter) (string, []any) {
	w := fieldsWhere(f)
	w.after(f.After)
	inner := "SELECT m.* FROM messages m" + w.sql() +
		" ORDER BY m.failed_at DESC, m.id DESC LIMIT " + strconv.Itoa(textWindow)
	q := "SELECT " + messageColumns + " FROM (" + inner + ") m WHERE " + textTested(w.arg(likePattern(f.Text))) +
		" ORDER BY m.failed_at DESC, m.id DESC LIMIT " + w.arg(f.Limit+1)
	return q, w.args
}

// candidatesQuery counts the candidates of the window, up to textWindow.
func candidatesQuery(f *quarantine.Filter) (string, []any) {
	w := fieldsWhere(f)
	w.after(f.After)
	return "SELECT count(*) FROM (SELECT 1 FROM messages m" + w.sql() +
		" ORDER BY m.failed_at DESC, m.id DESC LIMIT " + strconv.Itoa(textWindow) + ") w", w.args
}

// listText returns up to f.Limit+1 messages matching f, which has text.
func (s *Store) listText(ctx context.Context, f *quarantine.Filter) ([]*quarantine.Message, error) {
	q, args := windowQuery(f)
	msgs, err := s.queryMessages(ctx, q, args)
	if err != nil || len(msgs) > f.Limit {
		return msgs, err
	}
	q, args = candidatesQuery(f)
	var n int
	if err := s.pool.QueryRow(ctx, q, args...).Scan(&n); err != nil {
		return nil, translate(err, "list messages")
	}
	if n < textWindow {
		return msgs, nil // the window held every candidate: the answer is complete
	}
	q, args = listQuery(f)
	return s.queryMessages(ctx, q, args)
}

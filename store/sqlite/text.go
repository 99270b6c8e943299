package sqlite

import (
	"context"
	"database/sql"
	"strconv"
	"strings"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/search"
)

// Text search (Filter.Text) matches a message when the case folding of
// the text is a substring of the folded reason, job name or current
// payload text (package store/internal/search). It reads the documents of
// search_docs (search.go keeps them) and their FTS5 trigram index.
//
// A page of a list is found in steps, each bounded. First the newest
// textFirstWindow candidates (the messages matching the other filters,
// in index order) are tested one by one against their documents: a term
// that many messages contain fills the page there. Then windows of
// textWindow while the matches found predict a full page within
// textWindowsMore of them; otherwise (a rarer term) the FTS5 index finds
// the documents holding the term after the windows, and only those are
// sorted and joined to messages. A text shorter than search.MinIndexed
// runes has no trigram; it is tested window after window.
const textWindow = 2000

// textFirstWindow is the size of the first window: small, so that a rare
// term, which the index answers, does not pay for many tests first, as
// on PostgreSQL (docs/benchmarks.md).
const textFirstWindow = 512

// textWindowsMore is how many more windows listText tests, at most, when
// the windows before found matches: a term that will fill the page in
// that many is cheaper to test row by row than to look up.
const textWindowsMore = 1

// textCond returns the condition on m, and its arguments, of a filter's
// text: a test of the message's document when probe or when the text
// has no trigram, the FTS5 index otherwise.
func textCond(text string, probe bool) (string, []any) {
	fq := search.Fold(text)
	if probe || !search.Indexed(fq) {
		// instr matches literally: no LIKE wildcards, no escaping to get wrong.
		return `EXISTS (SELECT 1 FROM search_docs d WHERE d.message_id = m.id AND instr(d.doc, ?) > 0)`, []any{fq}
	}
	return `m.id IN (SELECT d.message_id FROM search_fts JOIN search_docs d ON d.docid = search_fts.rowid
		WHERE search_fts MATCH ? AND instr(d.doc, ?) > 0)`, []any{ftsTrigrams(fq), fq}
}

// ftsMaxTrigrams is how many trigrams of a text a search looks up at most;
// the documents holding them are tested for the whole text anyway.
const ftsMaxTrigrams = 32

// ftsTrigrams returns the FTS5 query of the documents holding every
// trigram of the folded text fq (up to ftsMaxTrigrams of them, spread
// over fq), each quoted as one token: a superset of the documents
// holding fq, which instr then tests.
func ftsTrigrams(fq string) string {
	rs := []rune(fq)
	n := len(rs) - search.MinIndexed + 1
	step := max(1, n/ftsMaxTrigrams)
	seen := map[string]bool{}
	var terms []string
	for i := 0; i < n && len(terms) < ftsMaxTrigrams; i += step {
		t := string(rs[i : i+search.MinIndexed])
		if !seen[t] {
			seen[t] = true
			terms = append(terms, `"`+strings.ReplaceAll(t, `"`, `""`)+`"`)
		}
	}
	return strings.Join(terms, " AND ")
}

// listText returns up to f.Limit+1 messages matching f, which has text:
// the first window, then more windows while the matches found predict a
// full page within textWindowsMore of them, then the index (or, for a
// text without trigrams, window after window) until the page is full or
// the candidates run out.
func (s *Store) listText(ctx context.Context, f quarantine.Filter) ([]*quarantine.Message, error) {
	if err := s.searchReady(ctx, f.Text); err != nil {
		return nil, err
	}
	indexed := search.Indexed(search.Fold(f.Text))
	want := f.Limit + 1
	var out []*quarantine.Message
	err := s.read(ctx, "list messages", func(tx *sql.Tx) error {
		g := f
		scanned, size := 0, textFirstWindow
		for {
			edge, more, err := windowEdge(ctx, tx, g, size)
			if err != nil {
				return err
			}
			w, args := whereText(g, true, true)
			if more {
				w += " AND (m.failed_at, m.id) >= (?, ?)"
				args = append(args, micros(edge.FailedAt), edge.ID)
			}
			msgs, err := queryMessages(ctx, tx, `SELECT `+messageColumns+` FROM messages m`+w+
				` ORDER BY m.failed_at DESC, m.id DESC LIMIT ?`, append(args, want-len(out)))
			if err != nil {
				return err
			}
			out = append(out, msgs...)
			if len(out) >= want || !more {
				return nil // a full page, or the window held every candidate left
			}
			g.After = &edge
			scanned += size
			size = textWindow
			// Another window when the matches so far say it is likely
			// to fill the page; the index when the term is rarer.
			likely := len(out) > 0 && (want-len(out))*scanned/len(out) <= textWindowsMore*textWindow
			if indexed && !likely {
				q, args := indexedQuery(g, want-len(out))
				msgs, err := queryMessages(ctx, tx, q, args)
				out = append(out, msgs...)
				return err
			}
		}
	})
	return out, err
}

// windowEdge returns the last of the next size candidates of g, and
// false when fewer are left.
func windowEdge(ctx context.Context, tx *sql.Tx, g quarantine.Filter, size int) (quarantine.Cursor, bool, error) {
	g.Text = ""
	w, args := where(g, true)
	var c quarantine.Cursor
	var at int64
	err := tx.QueryRowContext(ctx, `SELECT m.failed_at, m.id FROM messages m`+w+
		` ORDER BY m.failed_at DESC, m.id DESC LIMIT 1 OFFSET `+strconv.Itoa(size-1), args...).Scan(&at, &c.ID)
	if noRows(err) {
		return c, false, nil
	}
	c.FailedAt = fromMicros(at)
	return c, err == nil, err
}

// indexedQuery returns the SQL of the first n matches of g, whose text has
// trigrams, after g.After: the documents holding the text, from the FTS5
// index, newest first, joined to their messages (CROSS JOIN keeps that
// order of the join) and filtered.
func indexedQuery(g quarantine.Filter, n int) (string, []any) {
	text, after := g.Text, g.After
	g.Text, g.After = "", nil
	fq := search.Fold(text)
	hits := `SELECT d.message_id, d.failed_at FROM search_fts JOIN search_docs d ON d.docid = search_fts.rowid
		WHERE search_fts MATCH ? AND instr(d.doc, ?) > 0`
	args := []any{ftsTrigrams(fq), fq}
	if after != nil {
		hits += ` AND (d.failed_at, d.message_id) < (?, ?)`
		args = append(args, micros(after.FailedAt), after.ID)
	}
	w, wargs := where(g, false)
	if w == "" {
		w = " WHERE m.id = h.message_id"
	} else {
		w += " AND m.id = h.message_id"
	}
	return `SELECT ` + messageColumns + ` FROM (` + hits + `) h CROSS JOIN messages m` + w +
		` ORDER BY h.failed_at DESC, h.message_id DESC LIMIT ?`, append(append(args, wargs...), n)
}

// queryMessages runs q, which selects messageColumns, in tx.
func queryMessages(ctx context.Context, tx *sql.Tx, q string, args []any) ([]*quarantine.Message, error) {
	return queryAll(ctx, tx, scanMessageRow, q, args...)
}

package postgres

import (
	"context"
	"math"
	"strconv"
	"unicode"

	"github.com/jackc/pgx/v5"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/search"
)

// Text search (Filter.Text) matches a message when the case folding of
// the text is a substring of the folded reason, job name or current
// payload text (package store/internal/search). It reads the documents
// of search_docs (search.go keeps them), whose key (migration 0011: the
// document with each ASCII character but letters and digits made a
// letter of its own) is under a pg_trgm GIN index: the key of the text,
// a substring of the key of every document holding the text, is looked
// up there and the document itself tested, so punctuation narrows the
// candidates.
//
// A page of a list is found in steps, each bounded. First the newest
// candidates (the messages matching the other filters, in list order)
// are tested one by one against their documents, textFirstWindow of
// them: a term that many messages contain fills the page there, without
// reading its many index entries. Otherwise the index gives the
// documents holding the term after the window, but at most a probe's
// worth (textProbe: about the square root of limit × documents, where
// testing row by row and sorting the matches cost the same): when they
// are fewer, they are the answer, sorted and joined to messages a few
// at a time. When they are more, the term is frequent: windows of
// textWindow while the matches found predict a full page within
// textWindowsMore windows (at least that many after a probe), then the
// index whole. A text without a run of three letters or digits gives
// pg_trgm no trigram to look up (the index would be read whole); it is
// tested window after window.
const textWindow = 2000

// hasTrigram reports whether the folded text fq has a run of at least
// search.MinIndexed letters or digits, the characters pg_trgm makes
// trigrams of (in a UTF-8 LC_CTYPE; with C, only the ASCII ones).
func hasTrigram(fq string) bool {
	run := 0
	for _, r := range fq {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			if run++; run >= search.MinIndexed {
				return true
			}
		} else {
			run = 0
		}
	}
	return false
}

// textPattern returns the LIKE pattern of a filter's text: the folded
// text as a literal substring.
func textPattern(text string) string { return likePattern(search.Fold(text)) }

// textCond is the condition on m of the text of a filter, for counts,
// samples and every other query but the list: the index when the text
// has trigrams, a probe of the message's document otherwise.
func textCond(w *where, text string) string {
	p := w.arg(textPattern(text))
	if hasTrigram(search.Fold(text)) {
		return `m.id IN (SELECT d.message_id FROM search_docs d WHERE ` + docMatch(w, text, p) + `)`
	}
	return textTested(p)
}

// docMatch is the condition on search_docs d of a text with trigrams
// whose LIKE pattern is the placeholder p: its key under the index (the
// key is computed by the database from the folded text, by search_key,
// the function of the generated column), then the document itself. The
// key maps every '%', '_' and backslash to a letter: it needs no escaping.
func docMatch(w *where, text, p string) string {
	return `d.key LIKE '%' || search_key(` + w.arg(search.Fold(text)) + `::text) || '%' AND d.doc LIKE ` + p
}

// textTested is the per-row condition on m for pattern p: one primary-key
// probe of its document, by a correlated scalar subquery (an EXISTS may
// be planned as a hashed scan of every document).
func textTested(p string) string {
	return `coalesce((SELECT d.doc LIKE ` + p + ` FROM search_docs d WHERE d.message_id = m.id), false)`
}

// textFirstWindow is the size of the first window: small, so that a rare
// term, which the index answers, does not pay for many tests first, and
// large enough that a term in 1% of the messages finds some of its
// matches there, most of the time (docs/benchmarks.md).
const textFirstWindow = 512

// windowQuery returns the windowed plan of a validated filter with text:
// the first limit+1 matches among the newest textWindow candidates after
// f.After.
func windowQuery(f *quarantine.Filter) (string, []any) { return windowQueryOf(f, textWindow) }

// windowQueryOf is windowQuery with a window of size candidates.
func windowQueryOf(f *quarantine.Filter, size int) (string, []any) {
	w := fieldsWhere(f)
	w.after(f.After)
	inner := "SELECT m.* FROM messages m" + w.sql() +
		" ORDER BY m.failed_at DESC, m.id DESC LIMIT " + strconv.Itoa(size)
	q := "SELECT " + messageColumns + " FROM (" + inner + ") m WHERE " + textTested(w.arg(textPattern(f.Text))) +
		" ORDER BY m.failed_at DESC, m.id DESC LIMIT " + w.arg(f.Limit+1)
	return q, w.args
}

// boundaryQuery returns the last candidate of the window after f.After,
// when the window is full (no row: the window held every candidate left).
func boundaryQuery(f *quarantine.Filter) (string, []any) { return boundaryQueryOf(f, textWindow) }

// boundaryQueryOf is boundaryQuery with a window of size candidates.
func boundaryQueryOf(f *quarantine.Filter, size int) (string, []any) {
	w := fieldsWhere(f)
	w.after(f.After)
	return "SELECT m.failed_at, m.id FROM messages m" + w.sql() +
		" ORDER BY m.failed_at DESC, m.id DESC OFFSET " + strconv.Itoa(size-1) + " LIMIT 1", w.args
}

// indexedQuery returns the indexed plan of a validated filter whose text
// has trigrams: the documents holding the text after f.After, from the
// GIN index, newest first, joined to their messages and filtered.
func indexedQuery(f *quarantine.Filter) (string, []any) {
	w := fieldsWhere(f)
	hits := "SELECT d.message_id, d.failed_at FROM search_docs d WHERE " + docMatch(w, f.Text, w.arg(textPattern(f.Text)))
	if c := f.After; c != nil {
		hits += " AND (d.failed_at, d.message_id) < (" + w.arg(c.FailedAt) + ", " + w.arg(c.ID) + ")"
	}
	w.conds = append(w.conds, "m.id = h.message_id")
	q := "SELECT " + messageColumns + " FROM (" + hits + ") h, messages m" + w.sql() +
		" ORDER BY h.failed_at DESC, h.message_id DESC LIMIT " + w.arg(f.Limit+1)
	return q, w.args
}

// probeQuery returns the documents holding the text of f after f.After,
// at most n of them (in no order from the index, then sorted newest
// first): n is the probe, bounded whatever the term. With trigrams (see
// probeTrigrams), the index is asked for the documents holding each of
// them, and the document is tested for the text.
func probeQuery(f *quarantine.Filter, n int, trigrams []string) (string, []any) {
	w := &where{}
	match := ""
	if len(trigrams) == 0 {
		match = docMatch(w, f.Text, w.arg(textPattern(f.Text)))
	} else {
		for _, t := range trigrams {
			match += "d.key LIKE " + w.arg("%"+t+"%") + " AND "
		}
		match += "d.doc LIKE " + w.arg(textPattern(f.Text))
	}
	hits := "SELECT d.message_id, d.failed_at FROM search_docs d WHERE " + match
	if c := f.After; c != nil {
		hits += " AND (d.failed_at, d.message_id) < (" + w.arg(c.FailedAt) + ", " + w.arg(c.ID) + ")"
	}
	return "SELECT message_id FROM (" + hits + " LIMIT " + w.arg(n) + ") h ORDER BY failed_at DESC, message_id DESC", w.args
}

// hitsQuery returns the messages among ids (the next hits, newest
// first) that match the other filters of f, newest first, at most n.
func hitsQuery(f *quarantine.Filter, ids []string, n int) (string, []any) {
	w := fieldsWhere(f)
	w.after(f.After)
	w.conds = append(w.conds, "m.id = ANY("+w.arg(ids)+"::text[])")
	return "SELECT " + messageColumns + " FROM messages m" + w.sql() +
		" ORDER BY m.failed_at DESC, m.id DESC LIMIT " + w.arg(n), w.args
}

// textProbe returns how many documents the probe of listText reads at
// most, for documents documents and pages of limit: about where testing
// the newest candidates one by one (limit / share of the documents that
// hold the term) costs what rechecking every match in the heap does (a
// recheck costs about three tests: half the square root of limit ×
// documents, from the costs in docs/benchmarks.md): 3,600 at a million
// documents, 11,000 at ten million.
func textProbe(documents float64, limit int) int {
	n := int(math.Sqrt(max(documents, 0)*float64(limit+1)) / 2)
	return min(max(n, 1000), 50_000)
}

// textWindowsMore is how many more windows listText tests, at most, when
// the windows before found matches: a term that will fill the page in
// that many is cheaper to test row by row than to look up.
const textWindowsMore = 4

// listText returns up to f.Limit+1 messages matching f, which has text:
// the first window, then (for a text with trigrams) the probe, whose
// hits are the answer when they are all the documents holding the text;
// then more windows while the matches found predict a full page within
// textWindowsMore of them (at least that many after a probe found the
// term frequent), then the index (or, for a text without trigrams,
// window after window) until the page is full or the candidates run out.
func (s *Store) listText(ctx context.Context, f *quarantine.Filter) ([]*quarantine.Message, error) {
	if err := s.searchReady(ctx, f.Text); err != nil {
		return nil, err
	}
	indexed := hasTrigram(search.Fold(f.Text))
	want := f.Limit + 1
	var out []*quarantine.Message
	g := *f
	scanned, size := 0, textFirstWindow
	probed, more := false, 0
	for {
		g.Limit = want - len(out) - 1
		q, args := windowQueryOf(&g, size)
		msgs, err := s.queryMessages(ctx, q, args)
		if err != nil {
			return nil, err
		}
		out = append(out, msgs...)
		if len(out) >= want {
			return out[:want], nil
		}
		c, left, err := s.boundary(ctx, &g, size)
		if err != nil {
			return nil, err
		}
		if !left {
			return out, nil // the window held every candidate: the answer is complete
		}
		g.After = &c
		scanned += size
		size = textWindow
		if !indexed {
			continue
		}
		// Another window when the matches so far say it is likely to fill
		// the page (a term in about 1% of the messages, or more than a
		// probe's worth); the probe, then the index, when the term is
		// rarer.
		likely := len(out) > 0 && (want-len(out))*scanned/len(out) <= textWindowsMore*textWindow
		if more--; likely || more >= 0 {
			continue
		}
		if !probed {
			probed = true
			ids, complete, err := s.probe(ctx, &g)
			if err != nil {
				return nil, err
			}
			if complete {
				return s.pageOfHits(ctx, &g, ids, out, want)
			}
			// More documents than a probe hold the term after the
			// window: a few windows are likely to fill the page.
			more = textWindowsMore
			continue
		}
		g.Limit = want - len(out) - 1
		q, args = indexedQuery(&g)
		msgs, err = s.queryMessages(ctx, q, args)
		if err != nil {
			return nil, err
		}
		return append(out, msgs...), nil
	}
}

// probe returns the IDs of the documents holding the text of g after
// g.After, newest first, and whether they are all of them (false: more
// than textProbe hold it, and ids is not the answer).
func (s *Store) probe(ctx context.Context, g *quarantine.Filter) ([]string, bool, error) {
	var docs float64
	if err := s.pool.QueryRow(ctx, `SELECT greatest(reltuples, 0) FROM pg_class WHERE oid = 'search_docs'::regclass`).Scan(&docs); err != nil {
		return nil, false, translate(err, "list messages")
	}
	n := textProbe(docs, g.Limit)
	trigrams, err := s.probeTrigrams(ctx, search.Fold(g.Text), docs)
	if err != nil {
		return nil, false, err
	}
	q, args := probeQuery(g, n+1, trigrams)
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, false, translate(err, "list messages")
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, false, translate(err, "list messages")
	}
	return ids, len(ids) <= n, nil
}

// pageOfHits completes out (up to want messages) from ids, the documents
// holding the text of g after g.After, newest first: their messages that
// match the other filters, a chunk of ids at a time.
func (s *Store) pageOfHits(ctx context.Context, g *quarantine.Filter, ids []string, out []*quarantine.Message, want int) ([]*quarantine.Message, error) {
	for len(ids) > 0 && len(out) < want {
		need := want - len(out)
		chunk := ids[:min(len(ids), max(2*need, 256))]
		ids = ids[len(chunk):]
		q, args := hitsQuery(g, chunk, need)
		msgs, err := s.queryMessages(ctx, q, args)
		if err != nil {
			return nil, err
		}
		out = append(out, msgs...)
	}
	return out, nil
}

// boundary returns the last candidate of the window of g, and false when
// the window held every candidate left.
func (s *Store) boundary(ctx context.Context, g *quarantine.Filter, size int) (quarantine.Cursor, bool, error) {
	q, args := boundaryQueryOf(g, size)
	var c quarantine.Cursor
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return c, false, translate(err, "list messages")
	}
	defer rows.Close()
	more := false
	for rows.Next() {
		if err := rows.Scan(&c.FailedAt, &c.ID); err != nil {
			return c, false, translate(err, "list messages")
		}
		more = true
	}
	if err := rows.Err(); err != nil {
		return c, false, translate(err, "list messages")
	}
	c.FailedAt = c.FailedAt.UTC()
	return c, more, nil
}

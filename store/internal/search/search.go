// Package search defines what text search (Filter.Text, the API's q)
// matches, the same for every store: q matches a message when the Unicode
// full case folding of q is a substring of the case folding of its
// reason, its job name or its current payload (when the payload is text).
//
// Both stores keep one search document per message, Doc of those three
// fields folded by Fold, and index it with their own trigram machinery
// (pg_trgm in PostgreSQL, the FTS5 trigram tokenizer in SQLite). Folding
// happens here, in Go, so that the two stores agree on every character.
package search

import (
	"context"
	"strings"

	"golang.org/x/text/cases"

	"github.com/quarantine-dev/quarantine"
)

// WholeSet readies f for a read of its whole set (counts, stats): no
// cursor nor limit, then Checked.
func WholeSet(ctx context.Context, f *quarantine.Filter, ready func(ctx context.Context, text string) error) error {
	f.After, f.Limit = nil, 0
	return Checked(ctx, f, ready)
}

// Checked checks f (Filter.Validate), then calls ready, the store's wait
// until its search index has caught up for f's text.
func Checked(ctx context.Context, f *quarantine.Filter, ready func(ctx context.Context, text string) error) error {
	if err := f.Validate(); err != nil {
		return err
	}
	return ready(ctx, f.Text)
}

// FilterText is the text of an optional filter ("" for none): what a
// store's search readiness waits for.
func FilterText(f *quarantine.Filter) string {
	if f == nil {
		return ""
	}
	return f.Text
}

// Sep separates the fields of a document. A folded q never contains it
// (Fold maps it to a space), so no match spans two fields.
const Sep = "\x1f"

// MinIndexed is the shortest q, in runes, that the trigram indexes can
// serve; shorter ones are tested row by row.
const MinIndexed = 3

// Fold returns the Unicode full case folding of s (ß and SS both fold to
// ss, final sigma to σ, K (Kelvin) to k), with Sep replaced by a space.
// ASCII text takes a fast path with the same result.
func Fold(s string) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			ascii = false
			break
		}
	}
	if ascii {
		b := []byte(s)
		for i, c := range b {
			switch {
			case 'A' <= c && c <= 'Z':
				b[i] = c + ('a' - 'A')
			case c == Sep[0]:
				b[i] = ' '
			}
		}
		return string(b)
	}
	return strings.ReplaceAll(cases.Fold().String(s), Sep, " ")
}

// Doc returns the search document of a message: its reason, job name and
// payload text (empty when the payload is binary or purged), each folded,
// joined by Sep.
func Doc(reason, jobName, payloadText string) string {
	return Fold(reason) + Sep + Fold(jobName) + Sep + Fold(payloadText)
}

// Indexed reports whether the folded query fq is long enough for the
// trigram indexes.
func Indexed(fq string) bool {
	n := 0
	for range fq {
		n++
		if n >= MinIndexed {
			return true
		}
	}
	return false
}

// Package jsonptr resolves JSON Pointers (RFC 6901, as jsontext.Pointer
// parses them) in decoded JSON documents, with one meaning everywhere
// the service takes a pointer: idempotency rules, redaction and schema
// violations. An array index is "0" or a number without a leading zero
// ("01" names nothing), as RFC 6901 says.
package jsonptr

import (
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// MaxBytes bounds a configured pointer.
const MaxBytes = 1024

// Valid reports whether p is a JSON Pointer to a value inside a document:
// it starts with "/", uses "~" only as "~0" or "~1", is valid UTF-8 without
// NUL, and is at most MaxBytes long.
func Valid(p string) bool {
	return strings.HasPrefix(p, "/") && len(p) <= MaxBytes && !strings.ContainsRune(p, 0) && jsontext.Pointer(p).IsValid()
}

// Escape is p with one more reference token, escaped ("~" as "~0", "/"
// as "~1").
func Escape(p, token string) string { return string(jsontext.Pointer(p).AppendToken(token)) }

// Get returns the value p names in doc (as decoded into any: maps,
// slices, scalars), and whether there is one. p must be Valid.
func Get(doc any, p string) (any, bool) {
	v, ok := doc, true
	for tok := range jsontext.Pointer(p).Tokens() {
		if v, ok = child(v, tok); !ok {
			return nil, false
		}
	}
	return v, true
}

// Set replaces the value p names in doc by v, in place, and reports
// whether p named one. p must be Valid (the whole document is never
// replaced).
func Set(doc any, p string, v any) bool {
	ptr := jsontext.Pointer(p)
	parent, ok := Get(doc, string(ptr.Parent()))
	if !ok || ptr == "" {
		return false
	}
	last := ptr.LastToken()
	switch c := parent.(type) {
	case map[string]any:
		if _, ok := c[last]; ok {
			c[last] = v
			return true
		}
	case []any:
		if n, ok := index(last, len(c)); ok {
			c[n] = v
			return true
		}
	}
	return false
}

func child(v any, tok string) (any, bool) {
	switch c := v.(type) {
	case map[string]any:
		x, ok := c[tok]
		return x, ok
	case []any:
		if n, ok := index(tok, len(c)); ok {
			return c[n], true
		}
	}
	return nil, false
}

// index is tok as an index of an array of n elements: digits, no leading
// zero, below n.
func index(tok string, n int) (int, bool) {
	if tok == "" || len(tok) > 1 && tok[0] == '0' {
		return 0, false
	}
	i := 0
	for _, r := range tok {
		if r < '0' || r > '9' {
			return 0, false
		}
		i = i*10 + int(r-'0')
		if i >= n {
			return 0, false
		}
	}
	return i, true
}

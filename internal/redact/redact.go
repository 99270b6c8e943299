// Package redact masks the configured JSON Pointers (redact.json_pointers)
// of a payload for the tokens that may not see them (viewers). The API and
// the web UI show payloads through it, so that both mask the same values
// the same way. The stored payload is never touched: only what a response
// or a page shows.
package redact

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
)

// Value replaces every masked value (the value ingest stores in place of a
// redacted header: collect.RedactedValue).
const Value = collect.RedactedValue

// MaxPointerBytes bounds a configured JSON Pointer.
const MaxPointerBytes = 1024

// ValidatePointer checks that p is a JSON Pointer (RFC 6901) naming a
// value inside a document: it starts with "/", and "~" is only used as
// "~0" or "~1". The error is EINVALID.
func ValidatePointer(p string) error {
	bad := quarantine.Errorf(quarantine.EINVALID, "%q is not a JSON Pointer (RFC 6901) into a payload, like /card/number", quarantine.Clip(p))
	if !strings.HasPrefix(p, "/") || len(p) > MaxPointerBytes || !utf8.ValidString(p) || strings.ContainsRune(p, 0) {
		return bad
	}
	for i := 0; i < len(p); i++ {
		if p[i] == '~' && (i+1 == len(p) || (p[i+1] != '0' && p[i+1] != '1')) {
			return bad
		}
	}
	return nil
}

// Tokens splits a valid pointer into its unescaped reference tokens.
func Tokens(p string) []string {
	toks := strings.Split(p[1:], "/")
	for i, t := range toks {
		toks[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return toks
}

// EscapeToken escapes one reference token of a JSON Pointer.
func EscapeToken(t string) string {
	return strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1")
}

// Payload replaces the value at each pointer of a JSON payload by Value.
// It returns the payload unchanged, and false, when it is not one JSON
// document or no pointer names a value in it. Pointers must be valid
// (ValidatePointer).
func Payload(payload []byte, pointers []string) ([]byte, bool) {
	if len(pointers) == 0 {
		return payload, false
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return payload, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return payload, false
	}
	changed := false
	for _, p := range pointers {
		if maskAt(doc, Tokens(p)) {
			changed = true
		}
	}
	if !changed {
		return payload, false
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return payload, false
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), true
}

// maskAt replaces the value the tokens lead to, below doc, in place.
func maskAt(doc any, toks []string) bool {
	for i, t := range toks {
		last := i == len(toks)-1
		switch c := doc.(type) {
		case map[string]any:
			v, ok := c[t]
			if !ok {
				return false
			}
			if last {
				c[t] = Value
				return true
			}
			doc = v
		case []any:
			n, err := strconv.Atoi(t)
			if err != nil || n < 0 || n >= len(c) || (len(t) > 1 && t[0] == '0') {
				return false
			}
			if last {
				c[n] = Value
				return true
			}
			doc = c[n]
		default:
			return false
		}
	}
	return false
}

// Sees reports whether t sees payloads unmasked: operators and admins do,
// viewers do not.
func Sees(t *quarantine.Token) bool { return t != nil && t.Role.AtLeast(quarantine.RoleOperator) }

// For returns the payload as token t may see it under pointers: masked
// for a viewer, as stored for the others; masked reports whether a value
// was replaced.
func For(t *quarantine.Token, pointers []string, payload []byte) (shown []byte, masked bool) {
	if len(pointers) == 0 || Sees(t) {
		return payload, false
	}
	return Payload(payload, pointers)
}

// SearchDenied reports whether a text search by t must be refused while
// pointers are redacted: matching search terms against the hidden values
// would reveal them one guess at a time.
func SearchDenied(t *quarantine.Token, pointers []string, text string) bool {
	return text != "" && len(pointers) > 0 && !Sees(t)
}

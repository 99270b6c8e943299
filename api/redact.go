package api

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
)

// maxPointerBytes bounds a configured JSON Pointer.
const maxPointerBytes = 1024

// ValidatePointer checks that p is a JSON Pointer (RFC 6901) naming a
// value inside a document: it starts with "/", and "~" is only used as
// "~0" or "~1". The error is EINVALID.
func ValidatePointer(p string) error {
	bad := quarantine.Errorf(quarantine.EINVALID, "%q is not a JSON Pointer (RFC 6901) into a payload, like /card/number", clip(p))
	if !strings.HasPrefix(p, "/") || len(p) > maxPointerBytes || !utf8.ValidString(p) || strings.ContainsRune(p, 0) {
		return bad
	}
	for i := 0; i < len(p); i++ {
		if p[i] == '~' && (i+1 == len(p) || (p[i+1] != '0' && p[i+1] != '1')) {
			return bad
		}
	}
	return nil
}

// pointerTokens splits a valid pointer into its unescaped reference tokens.
func pointerTokens(p string) []string {
	toks := strings.Split(p[1:], "/")
	for i, t := range toks {
		toks[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return toks
}

// escapePointerToken escapes one reference token of a JSON Pointer.
func escapePointerToken(t string) string {
	return strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1")
}

// redact replaces the value at each pointer of a JSON payload by
// "<redacted>". It returns the payload unchanged, and false, when it is
// not one JSON document or no pointer names a value in it. The stored
// payload is never touched: only what a response shows.
func redact(payload []byte, pointers []string) ([]byte, bool) {
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
		if maskAt(doc, pointerTokens(p)) {
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
				c[t] = collect.RedactedValue
				return true
			}
			doc = v
		case []any:
			n, err := strconv.Atoi(t)
			if err != nil || n < 0 || n >= len(c) || (len(t) > 1 && t[0] == '0') {
				return false
			}
			if last {
				c[n] = collect.RedactedValue
				return true
			}
			doc = c[n]
		default:
			return false
		}
	}
	return false
}

// searchDenied refuses a text search over payloads to a token that may
// not see redacted values, while values are redacted: matching search
// terms against the hidden values would reveal them one guess at a time.
// The refusal is a 403, audited like every other; it reports whether it
// answered.
func (s *Server) searchDenied(w http.ResponseWriter, r *http.Request, f *quarantine.Filter) bool {
	if f.Text == "" || len(s.cfg.RedactPointers) == 0 || canSeeRedacted(tokenFrom(r.Context())) {
		return false
	}
	s.deny(w, r, map[string]any{"required_role": string(quarantine.RoleOperator), "reason": "text search over redacted payloads"},
		"text search (q) is not available to viewers while payload fields are redacted (redact.json_pointers): it would reveal them")
	return true
}

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

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
	"github.com/quarantine-dev/quarantine/internal/jsonptr"
)

// Value replaces every masked value (the value ingest stores in place of a
// redacted header: collect.RedactedValue).
const Value = collect.RedactedValue

// MaxPointerBytes bounds a configured JSON Pointer.
const MaxPointerBytes = jsonptr.MaxBytes

// ValidatePointer checks that p is a JSON Pointer (RFC 6901) naming a
// value inside a document (jsonptr.Valid). The error is EINVALID.
func ValidatePointer(p string) error {
	if !jsonptr.Valid(p) {
		return quarantine.Errorf(quarantine.EINVALID, "%q is not a JSON Pointer (RFC 6901) into a payload, like /card/number", quarantine.Clip(p))
	}
	return nil
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
		if jsonptr.Set(doc, p, Value) {
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

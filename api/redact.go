package api

import (
	"net/http"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/redact"
)

// ValidatePointer checks that p is a JSON Pointer (RFC 6901) naming a
// value inside a document (internal/jsonptr, which every pointer of the
// service goes through). The error is EINVALID.
func ValidatePointer(p string) error { return redact.ValidatePointer(p) }

// redact replaces the value at each pointer of a JSON payload by
// "<redacted>" (redact.Payload). It returns the payload unchanged, and
// false, when it is not one JSON document or no pointer names a value in
// it. The stored payload is never touched: only what a response shows.
func redactPayload(payload []byte, pointers []string) ([]byte, bool) {
	return redact.Payload(payload, pointers)
}

// searchDenied refuses a text search over payloads to a token that may
// not see redacted values, while values are redacted: matching search
// terms against the hidden values would reveal them one guess at a time.
// The refusal is a 403, audited like every other; it reports whether it
// answered.
func (s *Server) searchDenied(w http.ResponseWriter, r *http.Request, f *quarantine.Filter) bool {
	if !redact.SearchDenied(tokenFrom(r.Context()), s.cfg.RedactPointers, f.Text) {
		return false
	}
	s.deny(w, r, map[string]any{"required_role": string(quarantine.RoleOperator), "reason": "text search over redacted payloads"},
		"text search (q) is not available to viewers while payload fields are redacted (redact.json_pointers): it would reveal them")
	return true
}

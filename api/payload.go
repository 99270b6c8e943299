package api

import (
	"encoding/base64"
	"encoding/json"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/quarantine-dev/quarantine"
)

// shownPayload is a payload as one response shows it.
type shownPayload struct {
	bytes    []byte
	asJSON   bool // under "payload", as they are; else base64 under "payload_base64"
	redacted bool // values at the configured JSON Pointers were masked
}

// showPayload decides how the token of r sees a payload: masked at the
// redaction pointers for viewers, as JSON when it is JSON of a JSON
// content type, as base64 otherwise.
func (s *Server) showPayload(r *http.Request, contentType string, b []byte) shownPayload {
	p := shownPayload{bytes: b}
	if len(s.cfg.RedactPointers) > 0 && !canSeeRedacted(tokenFrom(r.Context())) {
		p.bytes, p.redacted = redactPayload(b, s.cfg.RedactPointers)
	}
	p.asJSON = jsonContentType(contentType) && utf8.Valid(p.bytes) && json.Valid(p.bytes)
	return p
}

// writeWithPayload writes v, which marshals to a JSON object, with the
// payload added: its bytes under "payload" when they are JSON (spliced in
// as they are, so that an unredacted payload's SHA-256 is payload_sha256),
// base64 under "payload_base64" otherwise, and "payload_redacted": true
// when values were masked.
func (s *Server) writeWithPayload(w http.ResponseWriter, r *http.Request, status int, v any, contentType string, payload []byte) {
	p := s.showPayload(r, contentType, payload)
	b, err := json.Marshal(v)
	if err != nil || len(b) < 2 || b[len(b)-1] != '}' {
		s.fail(w, r, quarantine.Internal(err, "encode a response with a payload"))
		return
	}
	b = b[:len(b)-1]
	if len(b) > 1 {
		b = append(b, ',')
	}
	if p.redacted {
		b = append(b, `"payload_redacted":true,`...)
	}
	if p.asJSON {
		b = append(b, `"payload":`...)
		b = append(b, p.bytes...)
	} else {
		b = append(b, `"payload_base64":"`...)
		b = base64.StdEncoding.AppendEncode(b, p.bytes)
		b = append(b, '"')
	}
	b = append(b, '}')
	w.Header().Set("Vary", "Authorization")
	s.writeRawJSON(w, status, b)
}

// jsonContentType reports whether ct is application/json, text/json or a
// +json type.
func jsonContentType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || mt == "text/json" || strings.HasSuffix(mt, "+json")
}

// etag is the strong entity tag of a payload: its SHA-256, quoted.
func etag(sha string) string { return `"` + sha + `"` }

// setETag sets the ETag of a payload-bearing answer. What a payload shows
// depends on the token (redaction), hence Vary: Authorization.
func setETag(w http.ResponseWriter, sha string) {
	w.Header().Set("ETag", etag(sha))
	w.Header().Set("Vary", "Authorization")
}

// etagListMatches reports whether an If-None-Match list holds the payload's
// tag (weak comparison, as RFC 9110 asks for If-None-Match) or is "*".
func etagListMatches(list, sha string) bool {
	for _, t := range strings.Split(list, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.TrimPrefix(t, "W/") == etag(sha) {
			return true
		}
	}
	return false
}

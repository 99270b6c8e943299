package collect

import (
	"encoding/json"
	"log/slog"
	"strings"
	"unicode/utf8"

	"github.com/quarantine-dev/quarantine"
)

// HeaderValue is the value in h of the first of names h has, each looked
// up as written and then regardless of case; "" when h has none of them.
func HeaderValue(h map[string]string, names ...string) string {
	for _, n := range names {
		if v, ok := h[n]; ok {
			return v
		}
		for k, v := range h {
			if strings.EqualFold(k, n) {
				return v
			}
		}
	}
	return ""
}

// SniffContentType is the content type of a payload that does not say
// its own: JSON for a valid UTF-8 JSON document, binary otherwise.
func SniffContentType(b []byte) string {
	if len(b) > 0 && utf8.Valid(b) && json.Valid(b) {
		return ContentTypeJSON
	}
	return ContentTypeBinary
}

// Raw is the message a dead letter that is not an envelope gives before
// its broker's reading of the failure: the payload byte-exact (empty, not
// nil, for none), the headers, the content type of content-type (or
// contentType) or else sniffed, the job name of x-quarantine-job-name, no
// flags yet.
func Raw(source string, kind quarantine.SourceKind, payload []byte, headers map[string]string) *quarantine.Message {
	m := &quarantine.Message{Source: source, SourceKind: kind, Payload: payload, Headers: headers, Flags: []string{}}
	if m.Payload == nil {
		m.Payload = []byte{}
	}
	m.ContentType = HeaderValue(headers, "content-type", "contentType")
	if m.ContentType == "" {
		m.ContentType = SniffContentType(payload)
	}
	m.JobName = HeaderValue(headers, "x-quarantine-job-name")
	return m
}

// InvalidUTF8At returns the offset of the first byte of b that is not
// valid UTF-8, or -1.
func InvalidUTF8At(b []byte) int {
	if utf8.Valid(b) {
		return -1
	}
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return -1
}

// Unrecognised marks m, kept raw, as neither an envelope nor what its
// broker's dead letters look like (what: "a RabbitMQ dead letter (no
// x-death header)"): class unknown, flagged malformed, the reason saying
// so.
func Unrecognised(m *quarantine.Message, what string) *quarantine.Message {
	m.FailureClass = quarantine.ClassUnknown
	m.AddFlag(quarantine.FlagMalformed)
	m.Reason = "neither a " + EnvelopeV1 + " envelope nor " + what + ": stored raw, failure unknown"
	return m
}

// CheckSource is what a broker's NewSource checks first: invalid, the
// error of its configuration's Validate, then that the collector has a
// name. It returns the logger to use: slog.Default() for nil.
func CheckSource(name string, invalid error, logger *slog.Logger) (*slog.Logger, error) {
	if invalid != nil {
		return nil, invalid
	}
	if name == "" {
		return nil, quarantine.FieldErrorf(quarantine.EINVALID, "name", "a collector needs a name")
	}
	if logger == nil {
		logger = slog.Default()
	}
	return logger, nil
}

package quarantine

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
)

var (
	reUUID   = regexp.MustCompile(`(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`)
	reHex    = regexp.MustCompile(`(?i)\b(?:0x)?[0-9a-f]*[0-9][0-9a-f]*[a-f][0-9a-f]*\b|\b(?:0x)?[0-9a-f]*[a-f][0-9a-f]*[0-9][0-9a-f]*\b`)
	reQuoted = regexp.MustCompile(`"[^"]*"|'[^']*'|` + "`[^`]*`")
	reNumber = regexp.MustCompile(`[-+]?\d+(?:\.\d+)?`)
	reSpaces = regexp.MustCompile(`\s+`)
)

// NormalizeReason strips the parts of a failure reason that differ between
// occurrences of the same failure: quoted values, UUIDs, hex ids and numbers.
func NormalizeReason(reason string) string {
	s := reQuoted.ReplaceAllString(reason, "<str>")
	s = reUUID.ReplaceAllString(s, "<uuid>")
	s = reHex.ReplaceAllStringFunc(s, func(m string) string {
		// A run of hex letters alone is a word ("deadbeef", "facade"); a run
		// of digits alone is a number, normalised below.
		if !strings.ContainsAny(m, "0123456789") || !strings.ContainsAny(strings.ToLower(m), "abcdef") {
			return m
		}
		return "<hex>"
	})
	s = reNumber.ReplaceAllString(s, "<n>")
	return strings.TrimSpace(reSpaces.ReplaceAllString(s, " "))
}

// Fingerprint names a failure group: messages of one job that failed in
// one class for the same normalised reason share it.
func Fingerprint(jobName string, class FailureClass, reason string) string {
	h := sha256.New()
	h.Write([]byte(jobName))
	h.Write([]byte{0})
	h.Write([]byte(class))
	h.Write([]byte{0})
	h.Write([]byte(NormalizeReason(reason)))
	return hex.EncodeToString(h.Sum(nil))[:16]
}

package rules

import (
	"errors"
	"strings"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/jsonptr"
)

// InBody returns err with its field, when it names one of a body's
// fields by name (as the domain's Validate methods do), turned into a
// JSON Pointer below at: "reason" becomes "/reason".
func InBody(err error, at string) error {
	var e *quarantine.Error
	if !errors.As(err, &e) || e.Field == "" || strings.HasPrefix(e.Field, "/") || e.Field == "If-Match" {
		return err
	}
	c := *e
	c.Field = jsonptr.Escape(at, e.Field)
	return &c
}

// ClipPath bounds a path written to logs and audit details.
func ClipPath(p string) string {
	p = quarantine.SanitizeText(p)
	if len(p) > 256 {
		n := 256
		for n > 0 && p[n]&0xC0 == 0x80 {
			n--
		}
		p = p[:n] + "…"
	}
	return p
}

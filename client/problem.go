package client

import "strings"

// Error makes a Problem (an error answer, RFC 9457) an error value:
// its title and detail, the offending field (a query parameter, a
// header or a JSON Pointer into the body) and each JSON Schema
// violation, one a line.
func (p *Problem) Error() string {
	var b strings.Builder
	b.WriteString(p.Title)
	if p.Detail != "" && p.Detail != p.Title {
		b.WriteString(": ")
		b.WriteString(p.Detail)
	}
	if p.Field != nil && *p.Field != "" {
		b.WriteString(" (field ")
		b.WriteString(*p.Field)
		b.WriteString(")")
	}
	if p.Violations != nil {
		for _, v := range *p.Violations {
			ptr := v.Pointer
			if ptr == "" {
				ptr = "(the payload)"
			}
			b.WriteString("\n  ")
			b.WriteString(ptr)
			b.WriteString(": ")
			b.WriteString(v.Detail)
		}
	}
	return b.String()
}

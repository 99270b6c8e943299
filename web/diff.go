package web

import (
	"strings"

	"github.com/sergi/go-diff/diffmatchpatch"
)

// diffLine is one line of a line diff: Op is "same", "del" or "add";
// Old and New are its 1-based line numbers on each side (0 on the side
// it is not on).
type diffLine struct {
	Op       string
	Old, New int
	Text     string
}

// maxDiffLines bounds the lines of a diff the page shows.
const maxDiffLines = 5000

// lineDiff returns the lines of a and b as a line diff (diffmatchpatch's
// line mode), and whether it was cut at maxDiffLines.
func lineDiff(a, b string) ([]diffLine, bool) {
	// A last line with or without its "\n" is the same line.
	if a != "" && !strings.HasSuffix(a, "\n") {
		a += "\n"
	}
	if b != "" && !strings.HasSuffix(b, "\n") {
		b += "\n"
	}
	dmp := diffmatchpatch.New()
	ca, cb, lines := dmp.DiffLinesToChars(a, b)
	diffs := dmp.DiffCharsToLines(dmp.DiffMain(ca, cb, false), lines)
	var out []diffLine
	oldN, newN := 0, 0
	for _, d := range diffs {
		for _, l := range splitLines(d.Text) {
			if len(out) == maxDiffLines {
				return out, true
			}
			switch d.Type {
			case diffmatchpatch.DiffEqual:
				oldN++
				newN++
				out = append(out, diffLine{Op: "same", Old: oldN, New: newN, Text: l})
			case diffmatchpatch.DiffDelete:
				oldN++
				out = append(out, diffLine{Op: "del", Old: oldN, Text: l})
			case diffmatchpatch.DiffInsert:
				newN++
				out = append(out, diffLine{Op: "add", New: newN, Text: l})
			}
		}
	}
	return out, false
}

// splitLines splits s into lines without their "\n"; a last "\n" ends the
// last line rather than starting an empty one.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// changed reports whether a diff holds a change.
func changed(d []diffLine) bool {
	for _, l := range d {
		if l.Op != "same" {
			return true
		}
	}
	return false
}

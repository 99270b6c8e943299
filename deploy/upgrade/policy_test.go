package upgrade

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// policySince is the first migration number the expand-first rule is
// checked on (docs/deploy.md, "Upgrading"); the ones before were written
// before the rule and are left as they are.
const policySince = 18

// contractMarker declares a migration that contracts: it removes what the
// release before the previous one used, and says what in a comment line
// starting with this marker.
const contractMarker = "-- contract:"

// contracting finds what only a contract migration may do: drop a table
// or a column, rename, change a column's type, make a column NOT NULL,
// or add a NOT NULL column without a default (the previous release's
// inserts would fail).
var contracting = []struct {
	what string
	re   *regexp.Regexp
}{
	{"drops a table", regexp.MustCompile(`(?is)\bdrop\s+table\b`)},
	{"drops a column", regexp.MustCompile(`(?is)\bdrop\s+column\b`)},
	{"renames", regexp.MustCompile(`(?is)\brename\b`)},
	{"changes a column's type", regexp.MustCompile(`(?is)\balter\s+column\s+\S+\s+(set\s+data\s+)?type\b`)},
	{"makes a column NOT NULL", regexp.MustCompile(`(?is)\bset\s+not\s+null\b`)},
	{"adds a NOT NULL column without a default", regexp.MustCompile(`(?is)\badd\s+(column\s+)?[^;,]*\bnot\s+null\b[^;,]*`)},
}

var lineComment = regexp.MustCompile(`--[^\n]*`)

// defaulted is a column definition that fills itself: a default or a
// generated column.
var defaulted = regexp.MustCompile(`(?i)\b(default|generated)\b`)

// policyProblems lists what sql does that the expand-first rule leaves
// to contract migrations, unless it is one (contractMarker).
func policyProblems(sql string) []string {
	for _, line := range strings.Split(sql, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), contractMarker) {
			return nil
		}
	}
	code := lineComment.ReplaceAllString(sql, "")
	var out []string
	for _, c := range contracting {
		for _, m := range c.re.FindAllString(code, -1) {
			if c.what == "adds a NOT NULL column without a default" && defaulted.MatchString(m) {
				continue
			}
			out = append(out, c.what+": "+strings.Join(strings.Fields(m), " "))
		}
	}
	return out
}

// Every migration from policySince on, of both stores, expands only, or
// says it contracts: the previous release's binary keeps serving on the
// schema between `migrate` and the end of the roll.
func TestMigrationsExpandFirst(t *testing.T) {
	t.Parallel()
	checked := 0
	for _, dir := range []string{"../../store/postgres/migrations", "../../store/sqlite/migrations"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.sql"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no migrations in %s (%v)", dir, err)
		}
		for _, f := range files {
			n, err := strconv.Atoi(strings.SplitN(filepath.Base(f), "_", 2)[0])
			if err != nil {
				t.Fatalf("%s: not a numbered migration", f)
			}
			if n < policySince {
				continue
			}
			checked++
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range policyProblems(string(b)) {
				t.Errorf("%s %s: a contract migration, so it must come a release after the code stopped using it and say so (%s …)", f, p, contractMarker)
			}
		}
	}
	t.Logf("%d migrations from %d on checked", checked, policySince)
}

// The check finds what contracts, and lets expanding and declared
// contracting migrations through.
func TestPolicyProblems(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		sql  string
		want int
	}{
		{"CREATE TABLE t (a int NOT NULL);\nCREATE INDEX t_a ON t (a);", 0},
		{"ALTER TABLE m ADD COLUMN flags text NOT NULL DEFAULT '[]';", 0},
		{"ALTER TABLE m ADD COLUMN note text;", 0},
		{"ALTER TABLE d ADD COLUMN key text NOT NULL GENERATED ALWAYS AS (lower(t)) STORED;", 0},
		{"-- drop table is mentioned in a comment only\nSELECT 1;", 0},
		{"DROP TABLE age_samples;", 1},
		{"ALTER TABLE m DROP COLUMN key;", 1},
		{"ALTER TABLE m RENAME COLUMN a TO b;", 1},
		{"ALTER TABLE m ALTER COLUMN a TYPE bigint;", 1},
		{"ALTER TABLE m ALTER COLUMN a SET NOT NULL;", 1},
		{"ALTER TABLE m ADD COLUMN owner text NOT NULL;", 1},
		{"-- contract: release 1.3 stopped reading key\nALTER TABLE m DROP COLUMN key;", 0},
	} {
		if got := policyProblems(c.sql); len(got) != c.want {
			t.Errorf("%q: %v, want %d problems", c.sql, got, c.want)
		}
	}
}

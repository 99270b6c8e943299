// Package migrate holds the rule both stores' migration runners follow:
// which embedded files are migrations and in what order they apply. The
// stores apply them with their own driver, each migration in its own
// transaction with its schema_migrations row.
package migrate

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// Migration is one numbered SQL file.
type Migration struct {
	Version int    // from the file name's NNNN
	Name    string // the file name
	SQL     string
}

// Load reads the migrations in dir of fsys. Every file there is a
// migration named NNNN_name.sql, and the numbers are 1..n without a gap or
// a repeat: a missing number would let two builds that each added "the
// next" migration agree on a version while holding different schemas.
// They are returned in version order.
func Load(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	var ms []Migration
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		num, rest, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v < 1 || rest == ".sql" || !strings.HasSuffix(rest, ".sql") {
			return nil, fmt.Errorf("migration %q is not named NNNN_name.sql", e.Name())
		}
		b, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		ms = append(ms, Migration{Version: v, Name: e.Name(), SQL: string(b)})
	}
	sort.SliceStable(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	for i, m := range ms {
		switch {
		case i > 0 && m.Version == ms[i-1].Version:
			return nil, fmt.Errorf("migrations %q and %q are both numbered %d", ms[i-1].Name, m.Name, m.Version)
		case m.Version != i+1:
			return nil, fmt.Errorf("migration %q: want number %d (migrations are numbered 1..n without a gap)", m.Name, i+1)
		}
	}
	return ms, nil
}

// Latest is the version a database has once every migration in ms is
// applied (0 for none).
func Latest(ms []Migration) int {
	if len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].Version
}

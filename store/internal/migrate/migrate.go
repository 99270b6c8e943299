// Package migrate holds the rules both stores' migration runners follow:
// which embedded files are migrations and in what order they apply
// (Load), and how each is applied (Apply: in its own transaction with its
// schema_migrations row). The stores give the SQL of their driver (Tx).
package migrate

import (
	"context"
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
	// Contract: the file has a line starting with ContractMarker. It
	// removes or changes what an earlier release's code used (drop,
	// rename, retype, a new NOT NULL), so a binary older than it must not
	// serve on the schema; every other migration only expands it, and
	// the previous release's binary keeps serving during a rolling
	// upgrade.
	Contract bool
}

// ContractMarker starts the line that declares a contract migration.
const ContractMarker = "-- contract:"

// IsContract reports whether sql declares a contract migration.
func IsContract(sql string) bool {
	for _, line := range strings.Split(sql, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), ContractMarker) {
			return true
		}
	}
	return false
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
		ms = append(ms, Migration{Version: v, Name: e.Name(), SQL: string(b), Contract: IsContract(string(b))})
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

// Tx is what one migration's transaction needs of a store's driver.
type Tx interface {
	// Prepare runs first in every migration's transaction: it creates
	// schema_migrations if needed (and takes the store's lock, if any).
	Prepare(ctx context.Context) error
	// Applied says whether version is recorded in schema_migrations.
	Applied(ctx context.Context, version int) (bool, error)
	// Exec runs a migration's SQL.
	Exec(ctx context.Context, sql string) error
	// Record adds version to schema_migrations, applied now, and to
	// schema_contracts (created then if missing) when it is a contract.
	Record(ctx context.Context, version int, contract bool) error
}

// Apply applies the migrations of ms that are not applied yet, in order,
// each in its own transaction together with its schema_migrations row:
// inTx runs fn in one transaction of the store's and commits it when fn
// returns nil. Running it again is a no-op; concurrent runs are safe when
// Prepare serialises them (a lock, or the store's single writer).
func Apply(ctx context.Context, ms []Migration, inTx func(name string, fn func(Tx) error) error) error {
	for _, m := range ms {
		err := inTx(m.Name, func(tx Tx) error {
			if err := tx.Prepare(ctx); err != nil {
				return err
			}
			done, err := tx.Applied(ctx, m.Version)
			if err != nil || done {
				return err
			}
			if err := tx.Exec(ctx, m.SQL); err != nil {
				return fmt.Errorf("migration %s: %w", m.Name, err)
			}
			return tx.Record(ctx, m.Version, m.Contract)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

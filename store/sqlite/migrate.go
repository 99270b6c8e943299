package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"time"

	"github.com/quarantine-dev/quarantine/store/internal/migrate"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrations returns the embedded migrations in version order, under the
// rule both stores share (store/internal/migrate).
func migrations() ([]migrate.Migration, error) {
	return migrate.Load(migrationFiles, "migrations")
}

const createMigrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
    version    INTEGER NOT NULL PRIMARY KEY,
    applied_at INTEGER NOT NULL
)`

// Migrate applies the embedded migrations that are not applied yet, each
// in its own transaction together with its schema_migrations row. Running
// it again is a no-op; concurrent runs serialise on the write lock.
func (s *Store) Migrate(ctx context.Context) error {
	ms, err := migrations()
	if err != nil {
		return translate(err, "read the migrations")
	}
	return migrate.Apply(ctx, ms, func(name string, fn func(migrate.Tx) error) error {
		return s.write(ctx, "migrate the database ("+name+")", func(tx *sql.Tx) error { return fn(migrationTx{tx, s.clock}) })
	})
}

// migrationTx is one migration's transaction (migrate.Tx); the write
// transaction holds the database's write lock.
type migrationTx struct {
	tx  *sql.Tx
	now func() time.Time
}

func (t migrationTx) Prepare(ctx context.Context) error {
	_, err := t.tx.ExecContext(ctx, createMigrationsTable)
	return err
}

func (t migrationTx) Applied(ctx context.Context, version int) (done bool, err error) {
	err = t.tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = ?)`, version).Scan(&done)
	return done, err
}

func (t migrationTx) Exec(ctx context.Context, sql string) error {
	_, err := t.tx.ExecContext(ctx, sql)
	return err
}

func (t migrationTx) Record(ctx context.Context, version int, contract bool) error {
	if _, err := t.tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`, version, micros(t.now())); err != nil || !contract {
		return err
	}
	if _, err := t.tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_contracts (version INTEGER NOT NULL PRIMARY KEY)`); err != nil {
		return err
	}
	_, err := t.tx.ExecContext(ctx, `INSERT INTO schema_contracts (version) VALUES (?)`, version)
	return err
}

// ContractsAbove returns the contract migrations applied above version
// (see migrate.Migration.Contract), in order: a binary whose latest
// migration is version may serve on a newer schema when there are none.
func (s *Store) ContractsAbove(ctx context.Context, version int) ([]int, error) {
	var vs []int
	err := s.read(ctx, "read the schema's contract migrations", func(tx *sql.Tx) error {
		var exists int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_contracts'`).Scan(&exists); err != nil || exists == 0 {
			return err
		}
		rows, err := tx.QueryContext(ctx, `SELECT version FROM schema_contracts WHERE version > ? ORDER BY version`, version)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var v int
			if err := rows.Scan(&v); err != nil {
				return err
			}
			vs = append(vs, v)
		}
		return rows.Err()
	})
	return vs, err
}

// SchemaVersion returns the highest applied migration (0 before the first
// Migrate) and the highest embedded one.
func (s *Store) SchemaVersion(ctx context.Context) (current, latest int, err error) {
	ms, err := migrations()
	if err != nil {
		return 0, 0, translate(err, "read the migrations")
	}
	latest = migrate.Latest(ms)
	err = s.read(ctx, "read the schema version", func(tx *sql.Tx) error {
		var exists int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'`).Scan(&exists); err != nil || exists == 0 {
			return err
		}
		return tx.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&current)
	})
	return current, latest, err
}

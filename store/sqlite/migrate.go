package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"

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
	for _, m := range ms {
		err := s.write(ctx, "migrate the database", func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, createMigrationsTable); err != nil {
				return err
			}
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations WHERE version = ?`, m.Version).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return nil
			}
			if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
				return fmt.Errorf("migration %s: %w", m.Name, err)
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`, m.Version, micros(s.clock()))
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
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

package postgres

import (
	"context"
	"embed"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/migrate"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrateLockKey is the advisory lock taken by every migration transaction.
// It is database-wide (not per schema) because pg_trgm is a database-wide
// extension that concurrent migrations of several schemas would otherwise
// race to create.
const migrateLockKey = 0x71756172 // "quar"

// migrations returns the embedded migrations in version order, under the
// rule both stores share (store/internal/migrate).
func migrations() ([]migrate.Migration, error) {
	return migrate.Load(migrationFiles, "migrations")
}

const createMigrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    integer PRIMARY KEY,
	applied_at timestamptz NOT NULL
)`

// Migrate applies the embedded migrations that are not applied yet, each
// in its own transaction under a database-wide advisory lock, and records
// each in schema_migrations. Concurrent calls are safe: the second waits,
// then finds the work done. Errors: EUNAVAILABLE, EINTERNAL.
func (s *Store) Migrate(ctx context.Context) error {
	ms, err := migrations()
	if err != nil {
		return quarantine.Internal(err, "read the embedded migrations")
	}
	for _, m := range ms {
		err := s.inTx(ctx, "migrate "+m.Name, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrateLockKey)); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, createMigrationsTable); err != nil {
				return err
			}
			var done bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = $1)`, m.Version).Scan(&done); err != nil {
				return err
			}
			if done {
				return nil
			}
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return fmt.Errorf("%s: %w", m.Name, err)
			}
			_, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)`, m.Version, s.clock())
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// SchemaVersion returns the highest applied migration (0 before the first
// Migrate) and the highest embedded one. Errors: EUNAVAILABLE, EINTERNAL.
func (s *Store) SchemaVersion(ctx context.Context) (current, latest int, err error) {
	ms, err := migrations()
	if err != nil {
		return 0, 0, quarantine.Internal(err, "read the embedded migrations")
	}
	latest = migrate.Latest(ms)
	var exists bool
	err = s.pool.QueryRow(ctx, `SELECT to_regclass('schema_migrations') IS NOT NULL`).Scan(&exists)
	if err != nil || !exists {
		return 0, latest, translate(err, "read the schema version")
	}
	err = s.pool.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&current)
	return current, latest, translate(err, "read the schema version")
}

package postgres

import (
	"context"
	"embed"
	"time"

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
	return migrate.Apply(ctx, ms, func(name string, fn func(migrate.Tx) error) error {
		return s.inTx(ctx, "migrate "+name, func(tx pgx.Tx) error { return fn(migrationTx{tx, s.clock}) })
	})
}

// migrationTx is one migration's transaction (migrate.Tx).
type migrationTx struct {
	tx  pgx.Tx
	now func() time.Time
}

// Prepare takes the database-wide advisory lock, then creates
// schema_migrations if it is missing. It does not even try when the table
// exists: CREATE TABLE IF NOT EXISTS needs the right to create in the
// schema, which the runtime role lacks, and Migrate with nothing to do
// must succeed for it (serve --migrate on an up-to-date schema).
func (t migrationTx) Prepare(ctx context.Context) error {
	if _, err := t.tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrateLockKey)); err != nil {
		return err
	}
	var exists bool
	if err := t.tx.QueryRow(ctx, `SELECT to_regclass('schema_migrations') IS NOT NULL`).Scan(&exists); err != nil || exists {
		return err
	}
	_, err := t.tx.Exec(ctx, createMigrationsTable)
	return err
}

func (t migrationTx) Applied(ctx context.Context, version int) (done bool, err error) {
	err = t.tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = $1)`, version).Scan(&done)
	return done, err
}

func (t migrationTx) Exec(ctx context.Context, sql string) error {
	_, err := t.tx.Exec(ctx, sql)
	return err
}

func (t migrationTx) Record(ctx context.Context, version int, contract bool) error {
	if _, err := t.tx.Exec(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)`, version, t.now()); err != nil || !contract {
		return err
	}
	if _, err := t.tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_contracts (version integer PRIMARY KEY)`); err != nil {
		return err
	}
	_, err := t.tx.Exec(ctx, `INSERT INTO schema_contracts (version) VALUES ($1)`, version)
	return err
}

// ContractsAbove returns the contract migrations applied above version
// (see migrate.Migration.Contract), in order: a binary whose latest
// migration is version may serve on a newer schema when there are none.
func (s *Store) ContractsAbove(ctx context.Context, version int) ([]int, error) {
	var exists bool
	if err := s.pool.QueryRow(ctx, `SELECT to_regclass('schema_contracts') IS NOT NULL`).Scan(&exists); err != nil || !exists {
		return nil, translate(err, "read the schema's contract migrations")
	}
	rows, err := s.pool.Query(ctx, `SELECT version FROM schema_contracts WHERE version > $1 ORDER BY version`, version)
	if err != nil {
		return nil, translate(err, "read the schema's contract migrations")
	}
	vs, err := pgx.CollectRows(rows, pgx.RowTo[int])
	return vs, translate(err, "read the schema's contract migrations")
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

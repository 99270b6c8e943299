// Package upgrade tests docs/deploy.md's "Upgrades, backups and
// restores" with the built binary: `migrate` run again applies nothing
// and keeps the audit head; a PostgreSQL database dumped with pg_dump and
// restored with pg_restore (and an SQLite store copied online with VACUUM
// INTO) passes `audit verify` against the head saved before the backup,
// and fails it once an event is cut from the restored copy, however
// consistent the cut chain looks on its own.
//
// It needs PostgreSQL and its pg_dump and pg_restore (Debian's
// postgresql-client, installed with the project's PostgreSQL by
// scripts/services.sh); without them it skips, and fails under CI=true.
// The package holds tests only.
package upgrade

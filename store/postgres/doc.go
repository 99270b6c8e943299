// Package postgres is the PostgreSQL implementation of store.Store, built
// on a pgx v5 connection pool (pool settings such as pool_max_conns may be
// given in the URL).
//
// Open connects; Migrate applies the embedded, numbered migrations in
// migrations/ (each in its own transaction, under an advisory lock, so
// that concurrent Migrate calls are safe). Every object is created
// unqualified, in the first schema of the connection's search_path: set
// it with the search_path runtime parameter of the URL to keep several
// installations (or tests) apart in one database. The first migration
// creates the pg_trgm extension in schema public, which needs the right
// to create (trusted) extensions in the database.
//
// The audit log is append-only: a trigger refuses UPDATE, DELETE and
// TRUNCATE on audit_log, and appends serialise on the row lock of
// audit_head, in the transaction of the change they record.
//
// InsertBatch inserts a batch with one INSERT … SELECT FROM unnest(…) ON
// CONFLICT DO NOTHING, in (source, dedupe_key) order so that overlapping
// concurrent batches cannot deadlock, and looks up the stored IDs of the
// keys that were taken.
//
// Text search (Filter.Text) is a case-insensitive literal ILIKE over the
// reason and the current payload (when it is text), served either by a
// bounded walk of the newest candidates or by pg_trgm GIN indexes; see
// text.go for how the two are chosen.
//
// Driver errors are translated to *quarantine.Error in one place
// (errors.go).
package postgres

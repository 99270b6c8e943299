// Package storetest is the conformance suite every store.Store passes.
//
// A store's own test calls Run with a Harness that opens a fresh, migrated,
// empty store per subtest and can run literal SQL against it (for the
// audit tamper cases). The suite uses only the store.Store contract and a
// few dialect-neutral SQL statements on the shared schema (messages,
// audit_log, audit_head), so the same cases run against PostgreSQL and
// SQLite.
//
// bench.go holds benchmark helpers (BenchInsertBatch, SeedMessages,
// BenchList) that each store calls from its own Benchmark functions.
package storetest

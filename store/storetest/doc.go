// Package storetest is the conformance suite every store.Store passes.
//
// A store's own test calls Run with a Harness that opens a fresh, migrated,
// empty store per subtest and can run literal SQL against it (for the
// audit tamper cases). The suite uses only the store.Store contract and a
// few dialect-neutral SQL statements on the shared schema (messages,
// audit_log, audit_head), so the same cases run against PostgreSQL and
// SQLite.
//
// The cases of issue 4 (edits, discards, the re-failure link, sampling,
// groups, queue statistics, the retention purge, hostile values in all of
// them) check results against reference models computed in Go; the
// sampling case tests uniformity with a chi-square test whose critical
// value is computed (chisquare.go).
//
// bench.go and benchops.go hold benchmark helpers (BenchInsertBatch,
// BenchInsertRatio, SeedMessages, BenchList, BenchOperations) that each
// store calls from its own Benchmark functions.
package storetest

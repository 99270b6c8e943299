// Package pgtest gives tests an isolated PostgreSQL schema.
//
// URL creates a fresh schema t_<random> in the test database, drops it in
// t.Cleanup, and returns a connection URL whose search_path selects it, so
// every table a store migrates lands there. Tests in many packages, and
// parallel tests in one, share one database without seeing each other.
//
// The database comes from QUARANTINE_TEST_POSTGRES_URL, else from the
// address scripts/services.sh recorded for the project's private instance
// (internal/testenv); there is no default address, so a test never
// reaches the machine's own PostgreSQL. When neither is set or the
// database does not answer, the test is skipped, except under CI=true,
// where a missing service fails the test.
package pgtest

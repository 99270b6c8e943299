// Package pgtest gives tests an isolated PostgreSQL schema.
//
// URL creates a fresh schema t_<random> in the test database, drops it in
// t.Cleanup, and returns a connection URL whose search_path selects it, so
// every table a store migrates lands there. Tests in many packages, and
// parallel tests in one, share one database without seeing each other.
//
// The database comes from QUARANTINE_TEST_POSTGRES_URL (default
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable). When it does
// not answer, the test is skipped, except under CI=true, where a missing
// service fails the test.
package pgtest

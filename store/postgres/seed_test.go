package postgres_test

import (
	"testing"

	"github.com/quarantine-dev/quarantine/internal/pgseed"
	"github.com/quarantine-dev/quarantine/store/postgres"
)

// seed makes sure s holds at least n seeded messages (rows seed-0 ..
// seed-(n-1)): the data set of internal/pgseed, which the web UI's
// benchmarks share.
func seed(tb testing.TB, s *postgres.Store, n int) {
	tb.Helper()
	pgseed.Seed(tb, s.Pool(), n)
}

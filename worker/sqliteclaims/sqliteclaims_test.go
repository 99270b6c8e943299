package sqliteclaims_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine/worker"
	"github.com/quarantine-dev/quarantine/worker/claimtest"
	"github.com/quarantine-dev/quarantine/worker/sqliteclaims"
)

// open returns claims on a fresh database file, closed when t ends.
func open(t testing.TB, now func() time.Time) *sqliteclaims.Claims {
	t.Helper()
	c, err := sqliteclaims.Open(context.Background(), filepath.Join(t.TempDir(), "claims.db"), now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestConformance(t *testing.T) {
	t.Parallel()
	claimtest.Run(t, func(t *testing.T, now func() time.Time) worker.Claims { return open(t, now) })
}

func TestMigrateIsIdempotent(t *testing.T) {
	t.Parallel()
	c := open(t, nil)
	if err := sqliteclaims.Migrate(context.Background(), c.DB()); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
}

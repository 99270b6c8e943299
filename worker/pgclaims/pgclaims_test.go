package pgclaims_test

import (
	"context"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine/internal/pgtest"
	"github.com/quarantine-dev/quarantine/worker"
	"github.com/quarantine-dev/quarantine/worker/claimtest"
	"github.com/quarantine-dev/quarantine/worker/pgclaims"
)

// open returns claims in a fresh schema, closed when t ends.
func open(t testing.TB, now func() time.Time) *pgclaims.Claims {
	t.Helper()
	c, err := pgclaims.Open(context.Background(), pgtest.URL(t), now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func TestConformance(t *testing.T) {
	t.Parallel()
	claimtest.Run(t, func(t *testing.T, now func() time.Time) worker.Claims { return open(t, now) })
}

func TestMigrateIsIdempotent(t *testing.T) {
	t.Parallel()
	c := open(t, nil)
	if err := pgclaims.Migrate(context.Background(), c.Pool()); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
}

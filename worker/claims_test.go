package worker_test

import (
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine/worker"
	"github.com/quarantine-dev/quarantine/worker/claimtest"
)

func TestMemoryClaimsConformance(t *testing.T) {
	t.Parallel()
	claimtest.Run(t, func(t *testing.T, now func() time.Time) worker.Claims {
		return worker.NewMemoryClaims(now)
	})
}

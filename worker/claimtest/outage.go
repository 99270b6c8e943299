package claimtest

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/quarantine-dev/quarantine/worker"
)

// ErrDown is what Outage returns while its store is down.
var ErrDown = errors.New("claimtest: the claim store is unreachable")

// Outage wraps Claims with a switch: while Down is set, Claim fails with
// ErrDown, as a claim store that cannot be reached does (the other
// methods still work, so that a test outage begins between deliveries).
// Failed counts the claims refused.
type Outage struct {
	worker.Claims
	Down   atomic.Bool
	Failed atomic.Int64
}

// Claim implements worker.Claims.
func (o *Outage) Claim(ctx context.Context, key, owner string, lease time.Duration) (worker.Claim, error) {
	if o.Down.Load() {
		o.Failed.Add(1)
		return worker.Claim{}, ErrDown
	}
	return o.Claims.Claim(ctx, key, owner, lease)
}

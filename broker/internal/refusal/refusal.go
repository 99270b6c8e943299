// Package refusal tells a refusal from an outage for a replay publisher
// whose client retries by itself until a timeout and then reports only
// that time ran out: a message that timed out while the broker answered
// was refused (it answered, and did not take it), not stranded by a
// broker that cannot be reached.
package refusal

import (
	"context"
	"sync/atomic"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/replay"
)

// Counter counts the broker's answers while the client retries. Safe for
// concurrent use; the zero value is ready.
type Counter struct{ n atomic.Uint64 }

// Add counts one answer.
func (c *Counter) Add() { c.n.Add(1) }

// Mark is the count before a publish, for Refused.
func (c *Counter) Mark() uint64 { return c.n.Load() }

// Refused marks Refused the pending results of a publish whose error
// timedOut says is the client's timeout, when the broker answered since
// mark and ctx has not ended.
func (c *Counter) Refused(ctx context.Context, mark uint64, res []replay.Result, timedOut func(error) bool) {
	if c.n.Load() <= mark || ctx.Err() != nil {
		return
	}
	for i := range res {
		if res[i].Outcome == quarantine.ItemPending && timedOut(res[i].Err) {
			res[i].Refused = true
		}
	}
}

package search

import (
	"context"
	"sync/atomic"
	"time"
)

// Indexer pacing: ingest goes first. The background indexer defers while
// messages are being inserted (within Busy of the last insert), but never
// longer than MaxDefer since it last indexed, and then it indexes one
// batch of BusyBatch; while ingest is calm it indexes batches of Batch
// until the queue is empty, so that it holds a writer only briefly. During a burst of
// ingest the index therefore falls behind (the lag metric says by how
// much) instead of slowing ingest down; it catches up once ingest calms.
//
// While ingest runs, Run indexes BusyBatch at the first Poll at least
// MaxDefer after the last pass: 250 messages every 1 to 1.5 s, so the lag
// stays under about 2 s while messages arrive at up to about 170 a second
// (50 every 4 s allowed about 12). Measured on 2 cores (BenchmarkInsert100k, 20,000 inserts, three
// interleaved rounds, medians), ingest at batches of 1 / 100 / 1000 went
// from 1,670 / 6,009 / 8,019 to 1,695 / 6,202 / 7,712 msg/s on SQLite and
// from 1,122 / 11,008 / 13,098 to 1,072 / 10,527 / 12,142 on PostgreSQL:
// within the noise, at most about 7%.
const (
	Busy      = 250 * time.Millisecond
	MaxDefer  = 1 * time.Second
	Batch     = 250
	BusyBatch = 250
	Poll      = 500 * time.Millisecond
)

// Pacer records inserts and tells the indexer when to defer. Its zero
// value is ready; it is safe for concurrent use.
type Pacer struct {
	lastInsert atomic.Int64 // unix nanoseconds
	lastIndex  atomic.Int64
}

// Inserted records that messages were inserted at now.
func (p *Pacer) Inserted(now time.Time) {
	if p != nil {
		p.lastInsert.Store(now.UnixNano())
	}
}

// busy reports whether messages were inserted within Busy of now.
func (p *Pacer) busy(now time.Time) bool {
	return now.UnixNano()-p.lastInsert.Load() < int64(Busy)
}

// Defer reports whether the indexer should leave the writer to ingest
// now; when it answers false, the indexer is taken to index at now.
func (p *Pacer) Defer(now time.Time) bool {
	n := now.UnixNano()
	if p.busy(now) && n-p.lastIndex.Load() < int64(MaxDefer) {
		return true
	}
	p.lastIndex.Store(n)
	return false
}

// Run indexes with index (which indexes up to n queued messages and says
// how many it did) every Poll until ctx ends, as p allows: one batch per
// pass (of BusyBatch) while ingest is busy, until the queue is empty
// otherwise. It
// reports errors to fail and tries again at the next poll.
func Run(ctx context.Context, p *Pacer, index func(ctx context.Context, n int) (int, error), fail func(error)) {
	t := time.NewTicker(Poll)
	defer t.Stop()
	for {
		for now := time.Now(); !p.Defer(now); now = time.Now() {
			size := Batch
			if p.busy(now) {
				size = BusyBatch
			}
			n, err := index(ctx, size)
			if err != nil {
				if ctx.Err() == nil {
					fail(err)
				}
				break
			}
			if n < size {
				break
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

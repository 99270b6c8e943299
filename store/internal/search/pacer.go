package search

import (
	"context"
	"sync"
	"time"
)

// Indexer pacing: ingest goes first, but the writer's idle time is the
// index's. The background indexer defers while an insert is under way
// (between the store's Begin and End), and while ingest is saturated (an
// insert under way more than Saturated of the last LoadWindow: one
// inserter writing back to back), never longer than MaxDefer since it
// last indexed. Between the inserts of an ingest that is busy (an insert
// within Busy) but not saturated it indexes batches of BusyBatch, and
// rests after each pass so that it takes at most Share of the time;
// while ingest is calm it indexes batches of Batch until the queue is
// empty.
//
// Under a saturating ingest the index therefore gets one BusyBatch every
// 1 to 1.5 s and falls behind (the lag metric says by how much) instead
// of slowing ingest down, and catches up once ingest calms; under a
// steady ingest that leaves the writer idle between inserts it keeps up
// (BenchmarkSearchLag, BenchmarkInsert100k: docs/benchmarks.md).
const (
	Busy      = 250 * time.Millisecond
	MaxDefer  = 1 * time.Second
	Batch     = 250
	BusyBatch = 250
	Poll      = 500 * time.Millisecond
	Share     = 0.5
	// Saturated is the share of a LoadWindow with an insert under way
	// above which ingest is taken to use the writer as fast as it can:
	// the indexer then leaves it the gaps between inserts too.
	Saturated  = 0.3
	LoadWindow = 250 * time.Millisecond
)

// Pacer records inserts and tells the indexer when to defer. Its zero
// value is ready; it is safe for concurrent use.
type Pacer struct {
	mu         sync.Mutex
	lastInsert time.Time // the last Begin or End
	lastIndex  time.Time // when the last pass was let run
	rest       time.Time // until then a busy store's indexer rests (Indexed)
	inflight   int       // inserts under way
	busyFrom   time.Time // since then an insert has been under way (inflight > 0)
	winStart   time.Time // the load window under way
	winBusy    time.Duration
	load       float64 // the share of the last window with an insert under way
}

// account rolls the load window at now. p.mu is held.
func (p *Pacer) account(now time.Time) {
	if p.winStart.IsZero() {
		p.winStart = now
	}
	span := now.Sub(p.winStart)
	if span < LoadWindow {
		return
	}
	busy := p.winBusy
	if p.inflight > 0 {
		busy += now.Sub(p.busyFrom)
		p.busyFrom = now
	}
	p.load = busy.Seconds() / span.Seconds()
	p.winStart, p.winBusy = now, 0
}

// Begin records that an insert starts at now.
func (p *Pacer) Begin(now time.Time) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.account(now)
	if p.inflight == 0 {
		p.busyFrom = now
	}
	p.inflight++
	p.lastInsert = now
}

// End records that an insert Begin recorded ended at now.
func (p *Pacer) End(now time.Time) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.account(now)
	if p.inflight--; p.inflight == 0 {
		p.winBusy += now.Sub(p.busyFrom)
	}
	p.lastInsert = now
}

// busy reports whether an insert began or ended within Busy of now.
func (p *Pacer) busy(now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return now.Sub(p.lastInsert) < Busy
}

// Defer reports whether the indexer should leave the writer to ingest
// now: while an insert is under way, while ingest is saturated, or while
// the indexer rests after a pass, as long as ingest is busy and the last
// pass was less than MaxDefer ago. When it answers false, the indexer is
// taken to index at now.
func (p *Pacer) Defer(now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.account(now)
	if now.Sub(p.lastInsert) < Busy && now.Sub(p.lastIndex) < MaxDefer &&
		(p.inflight > 0 || p.load > Saturated || now.Before(p.rest)) {
		return true
	}
	p.lastIndex = now
	return false
}

// Indexed records that a pass ran from start to end: the indexer of a
// busy store then rests long enough that its passes take at most Share
// of the time.
func (p *Pacer) Indexed(start, end time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rest = end.Add(time.Duration(float64(end.Sub(start)) * (1 - Share) / Share))
}

// Run indexes with index (which indexes up to n queued messages and says
// how many it did) every Poll until ctx ends, and between polls while p
// allows: batches of BusyBatch while ingest is busy, of Batch otherwise,
// until the queue is empty. It reports errors to fail and tries again at
// the next poll.
func Run(ctx context.Context, p *Pacer, index func(ctx context.Context, n int) (int, error), fail func(error)) {
	for {
		wait := Poll
		for now := time.Now(); ; now = time.Now() {
			if p.Defer(now) {
				// More may be queued: look again once the rest is over,
				// or soon while an insert is under way.
				wait = p.retry(now)
				break
			}
			size := Batch
			if p.busy(now) {
				size = BusyBatch
			}
			n, err := index(ctx, size)
			p.Indexed(now, time.Now())
			if err != nil {
				if ctx.Err() == nil {
					fail(err)
				}
				break
			}
			if n < size {
				break // the queue is empty
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// retryIn is how soon a deferred indexer looks again while an insert is
// under way.
const retryIn = 10 * time.Millisecond

// retry is how long a deferred indexer waits before it looks again: until
// its rest is over, or retryIn while an insert is under way; at most Poll.
func (p *Pacer) retry(now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if d := p.rest.Sub(now); d > 0 {
		return min(d, Poll)
	}
	return retryIn
}

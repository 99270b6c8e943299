package replay_test

import (
	"context"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/replay"
	"github.com/quarantine-dev/quarantine/store/sqlite"
)

// observed is a store as the engines using it see it: every call goes to
// the real store, and what the engines did (their scans, the items they
// leased and what became of each lease) is counted, so that a test waits
// on the engine's own steps rather than on the clock.
type observed struct {
	*sqlite.Store

	mu      sync.Mutex
	changed chan struct{} // closed and replaced at every counted event
	obs     observation
	out     map[leaseKey]bool // leased, neither recorded nor released yet
	slots   []time.Time       // every slot granted
	ahead   int               // grants returned before their first slot
}

// observation is what the engines did so far.
type observation struct {
	Scans    int // RunnableReplays calls that returned
	Leasing  int // lease calls under way
	Granted  int // items leased
	Out      int // leased items neither recorded nor released
	Releases int // ReleaseReplayItems calls that returned
	Records  int // RecordReplayResults calls that returned
	Results  int // results those calls carried
	Stale    int // results the store refused
}

// quiet says that nothing leased is on its way and no lease is being
// taken: every publish the engines will make of what they hold has been
// made and recorded (or given back).
func (o observation) quiet() bool { return o.Leasing == 0 && o.Out == 0 }

type leaseKey struct {
	batch, message string
	fence          int64
}

var _ replay.Store = (*observed)(nil)

func observe(st *sqlite.Store) *observed {
	return &observed{Store: st, changed: make(chan struct{}), out: map[leaseKey]bool{}}
}

// event applies f to the counts under the lock and wakes the waiters.
func (o *observed) event(f func(*observation)) {
	o.mu.Lock()
	f(&o.obs)
	o.obs.Out = len(o.out)
	close(o.changed)
	o.changed = make(chan struct{})
	o.mu.Unlock()
}

// now returns the counts so far.
func (o *observed) now() observation {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.obs
}

// wait blocks until cond holds for the counts, failing the test after
// timeout (which only bounds a failing test), and returns them.
func (o *observed) wait(t testing.TB, timeout time.Duration, what string, cond func(observation) bool) observation {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		o.mu.Lock()
		got, ch := o.obs, o.changed
		o.mu.Unlock()
		if cond(got) {
			return got
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("after %s, still not %s: %+v", timeout, what, got)
		}
	}
}

func (o *observed) RunnableReplays(ctx context.Context, now time.Time) ([]*quarantine.ReplayBatch, error) {
	bs, err := o.Store.RunnableReplays(ctx, now)
	o.event(func(c *observation) { c.Scans++ })
	return bs, err
}

func (o *observed) LeaseReplayItems(ctx context.Context, batchID, owner string, n int, ttl time.Duration, maxSeq int) ([]quarantine.ReplayLease, error) {
	o.event(func(c *observation) { c.Leasing++ })
	ls, err := o.Store.LeaseReplayItems(ctx, batchID, owner, n, ttl, maxSeq)
	o.leased(ls)
	return ls, err
}

func (o *observed) TakeReplaySlots(ctx context.Context, buckets []quarantine.RateBucket, want int, lead, ahead time.Duration) (int, time.Time, time.Duration, error) {
	n, first, wait, err := o.Store.TakeReplaySlots(ctx, buckets, want, lead, ahead)
	o.mu.Lock()
	rate := buckets[0].Rate
	for _, b := range buckets {
		rate = min(rate, b.Rate)
	}
	for k := range n {
		o.slots = append(o.slots, first.Add(time.Duration(math.Round(float64(k)/rate*1e9))))
	}
	if n > 0 && first.After(time.Now()) {
		o.ahead++
	}
	o.mu.Unlock()
	return n, first, wait, err
}

// granted returns every slot granted so far, in order, and how many
// grants returned before their first slot.
func (o *observed) granted() ([]time.Time, int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := slices.Clone(o.slots)
	slices.SortFunc(out, time.Time.Compare)
	return out, o.ahead
}

// leased ends a lease call that returned ls.
func (o *observed) leased(ls []quarantine.ReplayLease) {
	o.event(func(c *observation) {
		c.Leasing--
		c.Granted += len(ls)
		for _, l := range ls {
			o.out[leaseKey{l.Item.BatchID, l.Item.MessageID, l.Fence}] = true
		}
	})
}

func (o *observed) ReleaseReplayItems(ctx context.Context, leases []quarantine.ReplayLease) error {
	err := o.Store.ReleaseReplayItems(ctx, leases)
	o.event(func(c *observation) {
		c.Releases++
		for _, l := range leases {
			delete(o.out, leaseKey{l.Item.BatchID, l.Item.MessageID, l.Fence})
		}
	})
	return err
}

func (o *observed) RecordReplayResults(ctx context.Context, results []quarantine.ReplayResult) ([]int, error) {
	stale, err := o.Store.RecordReplayResults(ctx, results)
	o.event(func(c *observation) {
		c.Records++
		c.Results += len(results)
		c.Stale += len(stale)
		for _, r := range results {
			delete(o.out, leaseKey{r.BatchID, r.MessageID, r.Fence})
		}
	})
	return stale, err
}

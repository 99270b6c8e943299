package collect_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
	"github.com/quarantine-dev/quarantine/store/sqlite"
)

func openStore(t *testing.T) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "q.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return s
}

// flakyStore fails InsertBatch while down is set, and records whether any
// acknowledgement happened while it was failing.
type flakyStore struct {
	collect.Inserter
	down  atomic.Bool
	fails atomic.Int64
}

func (f *flakyStore) InsertBatch(ctx context.Context, msgs []*quarantine.Message) ([]quarantine.InsertResult, error) {
	if f.down.Load() {
		f.fails.Add(1)
		return nil, quarantine.Errorf(quarantine.EUNAVAILABLE, "database is down")
	}
	return f.Inserter.InsertBatch(ctx, msgs)
}

// gatedStore holds every InsertBatch until open is closed, counting the
// calls inside at once.
type gatedStore struct {
	collect.Inserter
	open        chan struct{}
	inside, max atomic.Int64
}

func (g *gatedStore) InsertBatch(ctx context.Context, msgs []*quarantine.Message) ([]quarantine.InsertResult, error) {
	n := g.inside.Add(1)
	for m := g.max.Load(); n > m && !g.max.CompareAndSwap(m, n); m = g.max.Load() {
	}
	defer g.inside.Add(-1)
	<-g.open
	return g.Inserter.InsertBatch(ctx, msgs)
}

func countStored(t *testing.T, s *sqlite.Store) (total int, keys map[string]int) {
	t.Helper()
	keys = map[string]int{}
	f := quarantine.Filter{Limit: quarantine.MaxLimit}
	for {
		p, err := s.ListMessages(t.Context(), f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range p.Messages {
			keys[m.MessageID]++
			total++
		}
		if p.Next == nil {
			return total, keys
		}
		f.After = p.Next
	}
}

// waitFor waits until cond holds. The deadline only bounds a failing
// test: under -race, with the package's tests in parallel on 2 loaded
// cores, draining 1000 messages into SQLite took over 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func start(t *testing.T, cfg collect.Config) (*collect.Collector, func()) {
	t.Helper()
	cfg.MinBackoff, cfg.MaxBackoff = time.Millisecond, 10*time.Millisecond
	c := collect.New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx) }()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	return c, stop
}

func TestCollectorStoresEachMessageOnceAndAcksAll(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	src := newMemSource(1000)
	c, stop := start(t, collect.Config{Name: "mem", Source: src, Store: st, BatchSize: 64, Preparer: &collect.Preparer{}})
	waitFor(t, "all acked", func() bool { _, _, a := src.state(); return a == 1000 })
	stop()
	total, keys := countStored(t, st)
	if total != 1000 || len(keys) != 1000 {
		t.Fatalf("stored %d (%d distinct), want 1000", total, len(keys))
	}
	s := c.Stats()
	if s.Received != 1000 || s.Stored != 1000 || s.Duplicates != 0 || s.LastBatchAt.IsZero() {
		t.Fatalf("stats %+v", s)
	}
}

func TestCollectorCrashBeforeAckRedeliversWithoutDuplicates(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	src := newMemSource(300)
	// Acks fail: everything is committed but nothing acknowledged, as when
	// the process dies between commit and ack.
	src.ackErr = errors.New("channel closed")
	c1, stop1 := start(t, collect.Config{Name: "mem", Source: src, Store: st, BatchSize: 50})
	waitFor(t, "all received", func() bool { r, _, _ := src.state(); return r == 0 && c1.Stats().Errors[collect.ErrAck] >= 6 })
	stop1()
	src.crash()
	src.mu.Lock()
	src.ackErr = nil
	src.mu.Unlock()
	c2, stop2 := start(t, collect.Config{Name: "mem", Source: src, Store: st, BatchSize: 50})
	waitFor(t, "all acked", func() bool { _, _, a := src.state(); return a == 300 })
	stop2()
	total, keys := countStored(t, st)
	if total != 300 || len(keys) != 300 {
		t.Fatalf("stored %d (%d distinct), want 300", total, len(keys))
	}
	if s := c2.Stats(); s.Duplicates != 300 || s.Stored != 0 {
		t.Fatalf("the redelivery must be absorbed as duplicates: %+v", s)
	}
}

func TestCollectorStoreOutageAcksNothingAndResumes(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	fl := &flakyStore{Inserter: st}
	fl.down.Store(true)
	src := newMemSource(200)
	c, stop := start(t, collect.Config{Name: "mem", Source: src, Store: fl, BatchSize: 50, Commits: 2})
	waitFor(t, "retries", func() bool { return fl.fails.Load() >= 5 })
	// Two batches are being retried and one was received ahead: no more.
	if _, inflight, acked := src.state(); acked != 0 || inflight != 150 {
		t.Fatalf("during the outage: %d acked, %d in flight; want 0 and three batches held", acked, inflight)
	}
	if w := src.window.Load(); w != 150 {
		t.Fatalf("window told to the source: %d, want (commits+1) × batch size = 150", w)
	}
	waitFor(t, "held deliveries extended", func() bool {
		src.mu.Lock()
		defer src.mu.Unlock()
		return src.extended > 0
	})
	if _, _, acked := src.state(); acked != 0 {
		t.Fatalf("%d acked while the store is down", acked)
	}
	fl.down.Store(false)
	waitFor(t, "all acked", func() bool { _, _, a := src.state(); return a == 200 })
	stop()
	if total, _ := countStored(t, st); total != 200 {
		t.Fatalf("stored %d, want 200", total)
	}
	if c.Stats().Errors[collect.ErrStore] < 5 {
		t.Fatalf("store errors not counted: %+v", c.Stats())
	}
}

// TestCollectorCommitsConcurrently holds the store inside InsertBatch until
// Commits are running, checks that no more run and that the source holds
// Commits+1 batches, then that every message is stored and acknowledged
// exactly once.
func TestCollectorCommitsConcurrently(t *testing.T) {
	t.Parallel()
	for _, commits := range []int{1, 3} {
		t.Run(fmt.Sprint(commits), func(t *testing.T) {
			t.Parallel()
			st := openStore(t)
			gate := &gatedStore{Inserter: st, open: make(chan struct{})}
			src := newMemSource(1000)
			c, stop := start(t, collect.Config{Name: "mem", Source: src, Store: gate, BatchSize: 20, Commits: commits})
			waitFor(t, "commits in flight", func() bool { return gate.inside.Load() == int64(commits) })
			// The receive loop then holds one batch ahead, and no further
			// commit starts (gate.max, checked at the end, bounds the run).
			waitFor(t, "one batch held ahead", func() bool { _, inflight, _ := src.state(); return inflight == 20*(commits+1) })
			if n := gate.inside.Load(); n != int64(commits) {
				t.Fatalf("%d commits at once, want %d", n, commits)
			}
			if _, inflight, acked := src.state(); acked != 0 || inflight != 20*(commits+1) {
				t.Fatalf("%d acked, %d held; want 0 and %d", acked, inflight, 20*(commits+1))
			}
			close(gate.open)
			waitFor(t, "all acked", func() bool { _, _, a := src.state(); return a == 1000 })
			stop()
			if total, keys := countStored(t, st); total != 1000 || len(keys) != 1000 {
				t.Fatalf("stored %d (%d distinct), want 1000", total, len(keys))
			}
			if s := c.Stats(); s.Stored != 1000 || s.Duplicates != 0 || s.Errors[collect.ErrAck] != 0 {
				t.Fatalf("stats %+v", s)
			}
			if max := gate.max.Load(); max > int64(commits) {
				t.Fatalf("up to %d commits ran at once, want at most %d", max, commits)
			}
		})
	}
}

// slowFirst holds the insert of the batch that holds message 0 until
// another batch was inserted: a later batch commits first.
type slowFirst struct {
	collect.Inserter
	once  sync.Once
	other chan struct{} // closed once another batch was inserted
}

func (s *slowFirst) InsertBatch(ctx context.Context, msgs []*quarantine.Message) ([]quarantine.InsertResult, error) {
	if msgs[0].MessageID == "0" {
		select {
		case <-s.other:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return s.Inserter.InsertBatch(ctx, msgs)
	}
	res, err := s.Inserter.InsertBatch(ctx, msgs)
	if err == nil {
		s.once.Do(func() { close(s.other) })
	}
	return res, err
}

// TestCollectorAcknowledgesInReceiveOrder commits the first batch slowly:
// the second commits first but is acknowledged after it.
func TestCollectorAcknowledgesInReceiveOrder(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	src := newMemSource(200)
	start(t, collect.Config{Name: "mem", Source: src, Store: &slowFirst{Inserter: st, other: make(chan struct{})}, BatchSize: 10, Commits: 3})
	waitFor(t, "all acked", func() bool { _, _, a := src.state(); return a == 200 })
	src.mu.Lock()
	order := slices.Clone(src.ackFirst)
	src.mu.Unlock()
	if len(order) != 20 || !slices.IsSorted(order) || order[0] != 0 {
		t.Fatalf("batches acknowledged in the order %v; want 0, 10, 20, ...", order)
	}
}

func TestCollectorSurvivesReceiveErrors(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	src := newMemSource(100)
	src.failRecv = 5
	c, stop := start(t, collect.Config{Name: "mem", Source: src, Store: st})
	waitFor(t, "all acked", func() bool { _, _, a := src.state(); return a == 100 })
	stop()
	if c.Stats().Errors[collect.ErrReceive] != 5 {
		t.Fatalf("receive errors: %+v", c.Stats())
	}
}

func TestCollectorStopLeavesUncommittedBatchUnacked(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	fl := &flakyStore{Inserter: st}
	fl.down.Store(true)
	src := newMemSource(20)
	_, stop := start(t, collect.Config{Name: "mem", Source: src, Store: fl})
	waitFor(t, "a failed attempt", func() bool { return fl.fails.Load() >= 1 })
	stop()
	if _, inflight, acked := src.state(); acked != 0 || inflight != 20 {
		t.Fatalf("after stop: %d acked, %d in flight", acked, inflight)
	}
}

func TestTwoCollectorsOneQueue(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	src := newMemSource(2000)
	for range 2 {
		start(t, collect.Config{Name: "mem", Source: src, Store: st, BatchSize: 37})
	}
	waitFor(t, "all acked", func() bool { _, _, a := src.state(); return a == 2000 })
	if total, keys := countStored(t, st); total != 2000 || len(keys) != 2000 {
		t.Fatalf("stored %d (%d distinct)", total, len(keys))
	}
}

func TestBackoffIsBoundedAndJittered(t *testing.T) {
	t.Parallel()
	seen := map[time.Duration]bool{}
	for n := 1; n < 40; n++ {
		d := collect.Backoff(n, 100*time.Millisecond, 5*time.Second)
		if d < 50*time.Millisecond || d > 5*time.Second {
			t.Fatalf("attempt %d: %v out of bounds", n, d)
		}
		seen[d] = true
	}
	if len(seen) < 10 {
		t.Fatal("no jitter")
	}
}

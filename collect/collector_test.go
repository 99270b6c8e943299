package collect_test

import (
	"context"
	"errors"
	"path/filepath"
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

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
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
	c, stop := start(t, collect.Config{Name: "mem", Source: src, Store: fl, BatchSize: 50})
	waitFor(t, "retries", func() bool { return fl.fails.Load() >= 5 })
	// One batch is being retried and one was received ahead: no more.
	if _, inflight, acked := src.state(); acked != 0 || inflight != 100 {
		t.Fatalf("during the outage: %d acked, %d in flight; want 0 and two batches held", acked, inflight)
	}
	src.mu.Lock()
	extended := src.extended
	src.mu.Unlock()
	if extended == 0 {
		t.Fatal("held deliveries were never extended")
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

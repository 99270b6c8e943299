// Package brokertest holds what the broker packages' tests share: a
// migrated SQLite store, a quiet logger, waiting on a condition, listing
// a collector's messages, and a worker run with its outcomes counted.
package brokertest

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
	"github.com/quarantine-dev/quarantine/internal/collecttest"
	"github.com/quarantine-dev/quarantine/store/sqlite"
	"github.com/quarantine-dev/quarantine/worker"
)

// Patience stretches every wait: the tests share two cores.
const Patience = 4

// OpenStore opens a migrated SQLite store in the test's directory.
func OpenStore(tb testing.TB) *sqlite.Store {
	tb.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(tb.TempDir(), "q.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = st.Close() })
	if err := st.Migrate(ctx); err != nil {
		tb.Fatal(err)
	}
	return st
}

// QuietLogger discards logs, or shows warnings under -v.
func QuietLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// Eventually waits up to d × Patience for cond, failing the test after.
func Eventually(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	d *= Patience
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Lister is the store's listing.
type Lister interface {
	ListMessages(ctx context.Context, f quarantine.Filter) (quarantine.MessagePage, error)
}

// AllMessages lists every message of source.
func AllMessages(tb testing.TB, st Lister, source string) []*quarantine.Message {
	tb.Helper()
	var out []*quarantine.Message
	f := quarantine.Filter{Source: []string{source}, Limit: quarantine.MaxLimit}
	for {
		page, err := st.ListMessages(context.Background(), f)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, page.Messages...)
		if page.Next == nil {
			return out
		}
		f.After = page.Next
	}
}

// Worker is a worker.Worker running in the test, with its outcomes.
type Worker struct {
	W      *worker.Worker
	cancel context.CancelFunc
	done   chan error
	once   sync.Once

	mu       sync.Mutex
	outcomes []worker.Outcome
}

// StartWorker runs a worker over d with jobs until the test ends.
func StartWorker(t *testing.T, d worker.Driver, claims worker.Claims, jobs ...worker.Job) *Worker {
	t.Helper()
	r := &Worker{done: make(chan error, 1)}
	cfg := worker.Config{Driver: d, Claims: claims, Logger: QuietLogger(), ClaimLease: 30 * time.Second,
		DrainTimeout: time.Second, SettleTimeout: 5 * time.Second}
	cfg.OnOutcome = func(o worker.Outcome) { r.mu.Lock(); r.outcomes = append(r.outcomes, o); r.mu.Unlock() }
	w, err := worker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if err := w.Register(j); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.W, r.cancel = w, cancel
	go func() { r.done <- w.Run(ctx) }()
	t.Cleanup(r.Stop)
	return r
}

// Stop ends the worker and waits for it.
func (r *Worker) Stop() { r.once.Do(func() { r.cancel(); <-r.done }) }

// Count is the number of outcomes res.
func (r *Worker) Count(res worker.Result) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, o := range r.outcomes {
		if o.Result == res {
			n++
		}
	}
	return n
}

// Runs records a handler's runs and effects per idempotency key.
type Runs struct {
	Mu   sync.Mutex
	At   []time.Time
	Done map[string]int
}

// NewRuns returns an empty record.
func NewRuns() *Runs { return &Runs{Done: map[string]int{}} }

// Ran records a run and returns how many there were.
func (x *Runs) Ran() int {
	x.Mu.Lock()
	defer x.Mu.Unlock()
	x.At = append(x.At, time.Now())
	return len(x.At)
}

// Effect records d's effect, by its idempotency key.
func (x *Runs) Effect(d *worker.Delivery) {
	x.Mu.Lock()
	defer x.Mu.Unlock()
	x.Done[d.Header(worker.HeaderIdempotencyKey)]++
}

// Count is the number of runs.
func (x *Runs) Count() int { x.Mu.Lock(); defer x.Mu.Unlock(); return len(x.At) }

// Effects is the number of effects of key.
func (x *Runs) Effects(key string) int { x.Mu.Lock(); defer x.Mu.Unlock(); return x.Done[key] }

// Dispatch sends one job message through s, failing the test on error.
func Dispatch(t *testing.T, s worker.Sender, j *worker.Job, key, payload string) {
	t.Helper()
	if err := worker.Dispatch(context.Background(), s, j, key, []byte(payload), nil); err != nil {
		t.Fatalf("Dispatch %s: %v", key, err)
	}
}

// Collector is a collector loop over a source, running in the test.
type Collector struct {
	Src    collect.Source
	Acks   *collecttest.Acks
	Col    *collect.Collector
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// RunCollector runs the collector name over src into st, batches of
// batch, with one idempotency rule (header X-Idempotency-Key for every
// queue), until the test ends.
func RunCollector(tb testing.TB, name string, src collect.Source, st collect.Inserter, batch int) *Collector {
	tb.Helper()
	acks := collecttest.NewAcks(src)
	col := collect.New(collect.Config{Name: name, Source: acks, Store: st, BatchSize: batch, Linger: 20 * time.Millisecond,
		MaxBackoff: 500 * time.Millisecond, Logger: QuietLogger(), Preparer: &collect.Preparer{
			Idempotency: []collect.IdempotencyRule{{Queues: []string{"*"}, Header: "X-Idempotency-Key"}},
		}})
	ctx, cancel := context.WithCancel(context.Background())
	r := &Collector{Src: src, Acks: acks, Col: col, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		_ = col.Run(ctx)
	}()
	tb.Cleanup(r.Stop)
	return r
}

// Stop ends the loop (it finishes its batches) and closes the source.
func (r *Collector) Stop() {
	r.once.Do(func() {
		r.cancel()
		<-r.done
		_ = r.Src.Close()
	})
}

package search

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// Indexer is a store's background search indexer: Run on its own
// goroutine from Start to Stop, paced by the inserts the store reports
// (Inserted). A nil *Indexer, or one made by Off, does nothing.
type Indexer struct {
	off    bool
	pacer  Pacer
	cancel context.CancelFunc
	done   sync.WaitGroup
}

// Off returns an indexer that Start leaves stopped: the store then
// indexes only when asked to (its IndexSearch, and the searches that
// index a short queue first).
func Off() *Indexer { return &Indexer{off: true} }

// Start runs index (which indexes up to n queued messages and says how
// many it took) in the background under Run, on workers goroutines
// sharing one Pacer (more than one only for a store whose passes can run
// at once: index is then called concurrently), unless ix is Off, and
// returns the indexer to keep. Errors are logged as warnings,
// except those quiet reports (such as the tables missing before the
// store is migrated) and the cancellation of Stop; the next poll tries
// again.
func Start(ix *Indexer, workers int, index func(ctx context.Context, n int) (int, error), quiet func(error) bool) *Indexer {
	if ix != nil && ix.off {
		return ix
	}
	ctx, cancel := context.WithCancel(context.Background())
	ix = &Indexer{cancel: cancel}
	for range max(workers, 1) {
		ix.done.Add(1)
		go func() {
			defer ix.done.Done()
			Run(ctx, &ix.pacer, index, func(err error) {
				if !errors.Is(err, context.Canceled) && !quiet(err) {
					slog.Warn("search indexer", "component", "store", "err", err)
				}
			})
		}()
	}
	return ix
}

// Inserting tells the indexer that messages are being inserted now, so
// that it leaves the writer to them (Pacer), until the returned func is
// called (once, when the insert is over).
func (ix *Indexer) Inserting() (done func()) {
	if ix == nil {
		return func() {}
	}
	ix.pacer.Begin(time.Now())
	return func() { ix.pacer.End(time.Now()) }
}

// Stop stops a started indexer and waits for its pass under way.
func (ix *Indexer) Stop() {
	if ix != nil && !ix.off && ix.cancel != nil {
		ix.cancel()
		ix.done.Wait()
	}
}

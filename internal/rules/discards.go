package rules

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store"
)

// Defaults of DiscardConfig.
const (
	// DefaultDiscardChunk is how many messages one chunk (one
	// transaction) of a discard operation covers at most; the background
	// runner sizes its chunks to hold the database for about
	// DiscardChunkTarget (SQLite has one writer: an ingest waits for it).
	DefaultDiscardChunk = 2000
	// DiscardChunkTarget is how long one background chunk should take,
	// unless the store says otherwise (ChunkPaced).
	DiscardChunkTarget = 150 * time.Millisecond
	// minDiscardChunk is the smallest chunk the runner sizes.
	minDiscardChunk = 100
	// discardRetries is how many times in a row a chunk that found the
	// database unavailable is tried again before the operation fails.
	discardRetries = 10
)

// DiscardConfig says how discards by filter run.
type DiscardConfig struct {
	// ConfirmAbove: a discard by filter matching more messages needs
	// expect_count (0: quarantine.DefaultConfirmAbove; negative: never).
	ConfirmAbove int
	// Chunk is the messages per transaction (0: DefaultDiscardChunk).
	Chunk int
	// ChunkTarget is how long one background chunk should take (0:
	// DiscardChunkTarget; serve takes the store's, ChunkPaced).
	ChunkTarget time.Duration
	// SyncMax: a discard by filter matching at most this many messages
	// completes before the request is answered, with the changed ids and
	// the skipped ones as before (0: quarantine.MaxBulk); a larger one is
	// answered at once (202) and runs in the background.
	SyncMax int
}

// ChunkPaced is a store whose discard chunks may take another time than
// DiscardChunkTarget. PostgreSQL's chunks lock the rows that collectors'
// inserts also write (the failure groups' and waiting minutes' counts)
// only from their status change to their commit, so a longer chunk does
// not hold an ingest back, and does once the work every chunk does
// whatever its size.
type ChunkPaced interface {
	DiscardChunkTarget() time.Duration
}

// ChunkSized is a store whose discard chunks may hold more messages than
// DefaultDiscardChunk: the runner still sizes them to their target time.
// SQLite's per-chunk work (a statement per failure group and status, the
// index pages shared by a chunk) is spread over more messages, while the
// single writer is held no longer.
type ChunkSized interface {
	DiscardChunkMax() int
}

// Discards starts discard operations and runs them in the background,
// one goroutine per operation, chunk after chunk until the store says it
// is over. Close stops them between chunks; the store keeps them running,
// and Resume (at the next start) takes them up where they stopped.
type Discards struct {
	st  store.Store
	cfg DiscardConfig
	log *slog.Logger

	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	mu      sync.Mutex
	running map[string]bool
}

// NewDiscards returns the runner of st's discard operations.
func NewDiscards(st store.Store, cfg DiscardConfig, log *slog.Logger) *Discards {
	if cfg.ConfirmAbove == 0 {
		cfg.ConfirmAbove = quarantine.DefaultConfirmAbove
	}
	if cfg.Chunk <= 0 {
		cfg.Chunk = DefaultDiscardChunk
	}
	if cfg.SyncMax <= 0 {
		cfg.SyncMax = quarantine.MaxBulk
	}
	if cfg.ChunkTarget <= 0 {
		cfg.ChunkTarget = DiscardChunkTarget
	}
	if log == nil {
		log = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Discards{st: st, cfg: cfg, log: log.With("component", "discard"), ctx: ctx, cancel: cancel, running: map[string]bool{}}
}

// ConfirmAbove is the count above which a discard by filter needs
// expect_count.
func (d *Discards) ConfirmAbove() int { return d.cfg.ConfirmAbove }

// Resume runs every operation the store holds as running (left by a
// process that stopped or died); it returns once they are started.
func (d *Discards) Resume(ctx context.Context) error {
	ops, err := d.st.RunningDiscards(ctx)
	if err != nil {
		return err
	}
	for _, op := range ops {
		d.log.Info("resuming a discard", "id", op.ID, "matched", op.Matched, "done", op.Done())
		d.run(op.ID)
	}
	return nil
}

// ResumeOne makes operation id runnable again for actor
// (store.ResumeDiscard: a failed one runs again from its cursor; a
// discard.resume event is recorded) and runs its chunks in the
// background, unless this process already does; it returns the
// operation as resumed. An operator resumes this way an operation whose
// process died (interrupted) without restarting serve, or one that
// failed once its cause is fixed. Errors: the store's (ENOTFOUND,
// ECONFLICT for a completed one).
func (d *Discards) ResumeOne(ctx context.Context, id, actor string) (quarantine.DiscardOperation, error) {
	op, err := d.st.ResumeDiscard(ctx, id, actor)
	if err != nil {
		return op, err
	}
	d.log.Info("resuming a discard", "id", op.ID, "matched", op.Matched, "done", op.Done())
	d.run(op.ID)
	return op, nil
}

// Close stops the operations between two chunks and waits for them.
// They stay running in the store.
func (d *Discards) Close() {
	d.cancel()
	d.wg.Wait()
}

// run applies the chunks of operation id in a goroutine, unless one
// already does.
func (d *Discards) run(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.running[id] || d.ctx.Err() != nil {
		return
	}
	d.running[id] = true
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		defer func() {
			d.mu.Lock()
			delete(d.running, id)
			d.mu.Unlock()
		}()
		d.finish(d.ctx, id)
	}()
}

// finish applies the chunks of operation id until it is over or ctx
// ends, and returns it as the store last reported it. A chunk that keeps
// failing fails the operation.
func (d *Discards) finish(ctx context.Context, id string) quarantine.DiscardOperation {
	var op quarantine.DiscardOperation
	n := min(d.cfg.Chunk, 4*minDiscardChunk)
	for failures := 0; ; {
		var err error
		t0 := time.Now()
		op, _, err = d.st.DiscardChunk(ctx, id, n)
		n = nextChunk(n, time.Since(t0), d.cfg.ChunkTarget, d.cfg.Chunk)
		switch {
		case ctx.Err() != nil:
			return op
		case err == nil:
			failures = 0
			if op.State != quarantine.DiscardRunning {
				d.log.Info("discard over", "id", id, "state", op.State, "matched", op.Matched,
					"discarded", op.Discarded, "skipped", op.Skipped, "took", op.UpdatedAt.Sub(op.StartedAt))
				return op
			}
		case quarantine.ErrorCode(err) == quarantine.EUNAVAILABLE && failures < discardRetries:
			failures++
			select {
			case <-ctx.Done():
				return op
			case <-time.After(time.Duration(failures) * 200 * time.Millisecond):
			}
		default:
			d.log.Error("a discard chunk failed: the discard stops", "id", id, "err", err)
			if ferr := d.st.FailDiscard(context.WithoutCancel(ctx), id, quarantine.ErrorMessage(err)); ferr != nil {
				d.log.Error("cannot record the failed discard", "id", id, "err", ferr)
			}
			op, _ = d.st.GetDiscard(context.WithoutCancel(ctx), id)
			return op
		}
	}
}

// nextChunk sizes the chunk after one of n messages that took took:
// towards target, at most doubling, between minDiscardChunk and most.
func nextChunk(n int, took, target time.Duration, most int) int {
	if took <= 0 {
		return min(2*n, most)
	}
	next := int(float64(n) * float64(target) / float64(took))
	return max(min(next, 2*n, most), min(minDiscardChunk, most))
}

// DiscardAnswer is the answer of a bulk discard: what changed (for a
// discard by ids, or by a filter small enough to complete before the
// answer) and, for a discard by filter, its operation.
type DiscardAnswer struct {
	quarantine.BulkResult
	Operation *quarantine.DiscardOperation `json:"operation,omitempty"`
}

// Discard discards what d selects within the owners of token t, as
// DiscardAs does. A filter starts an operation (StartDiscard: a count
// above ConfirmAbove needs expect_count): one of at most SyncMax messages
// is applied before Discard returns, with the changed and skipped ids
// and the operation completed; a larger one returns at once with the
// operation running in the background (async true). Errors are
// DiscardAs's and StartDiscard's, field names as JSON Pointers.
func (d *Discards) Discard(ctx context.Context, t *quarantine.Token, disc quarantine.Discard, method, path string) (ans DiscardAnswer, async bool, err error) {
	if disc.Filter != nil {
		f := *disc.Filter
		if disc.Filter = &f; !Scope(t, &f) {
			disc.Filter = nil // only other teams' owners were asked for: nothing matches
		}
	}
	if disc.Filter == nil {
		ans.BulkResult, err = DiscardAs(ctx, d.st, t, disc, method, path)
		return ans, false, err
	}
	disc.Actor = t.Actor()
	op, err := d.st.StartDiscard(ctx, disc, d.cfg.ConfirmAbove)
	if err != nil {
		return ans, false, InBody(err, "")
	}
	ans.BulkResult = quarantine.BulkResult{Matched: int(op.Matched), Changed: []string{}, Skipped: []quarantine.BulkSkipped{}}
	if op.Matched > int64(d.cfg.SyncMax) {
		d.run(op.ID)
		ans.Operation = &op
		return ans, true, nil
	}
	// Small: applied now, whether or not the client waits for it.
	ctx = context.WithoutCancel(ctx)
	for id := op.ID; op.State == quarantine.DiscardRunning; {
		var res quarantine.BulkResult
		if op, res, err = d.st.DiscardChunk(ctx, id, d.cfg.Chunk); err != nil {
			d.run(id) // the background takes it over
			return ans, false, err
		}
		ans.Changed = append(ans.Changed, res.Changed...)
		ans.Skipped = append(ans.Skipped, res.Skipped...)
	}
	// The answer lists ids in order, whatever order the store walked
	// its set in (SQLite: newest first).
	slices.Sort(ans.Changed)
	slices.SortFunc(ans.Skipped, func(a, b quarantine.BulkSkipped) int { return strings.Compare(a.ID, b.ID) })
	ans.Operation = &op
	return ans, false, nil
}

package replay

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"sync"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/defaults"
)

// Store is what the engine needs of the quarantine's store (store.Replays
// has these methods; see there for what each guarantees).
type Store interface {
	RunnableReplays(ctx context.Context, now time.Time) ([]*quarantine.ReplayBatch, error)
	GetReplay(ctx context.Context, id string) (*quarantine.ReplayBatch, error)
	ListReplayItems(ctx context.Context, f quarantine.ReplayItemFilter) ([]quarantine.ReplayItem, bool, error)
	ChangeReplay(ctx context.Context, c quarantine.ReplayChange) (*quarantine.ReplayBatch, error)
	LeaseReplayItems(ctx context.Context, batchID, owner string, n int, ttl time.Duration, maxSeq int) ([]quarantine.ReplayLease, error)
	ReleaseReplayItems(ctx context.Context, leases []quarantine.ReplayLease) error
	RecordReplayResults(ctx context.Context, results []quarantine.ReplayResult) (stale []int, err error)
	SetReplayCanary(ctx context.Context, batchID, verdict string, until *time.Time) (*quarantine.ReplayBatch, error)
	HoldReplayTokens(ctx context.Context, key string, until time.Time) error
	// TakeReplaySlots takes up to want slots of the engine's shared
	// publish schedule (one per item, never closer than 1/rate on any
	// rate bucket, however many engines take them), the first at least
	// lead after now, every one at most ahead after now: how many, and
	// the first (the k-th item must not be published before
	// slotTime(first, r, k), r the lowest rate of buckets), or how long
	// until one is free.
	TakeReplaySlots(ctx context.Context, buckets []quarantine.RateBucket, want int, lead, ahead time.Duration) (n int, first time.Time, wait time.Duration, err error)
}

// SystemActor records what the engine does by itself (halts, breaker
// pauses, completion, expiry).
const SystemActor = "system:replay"

// Defaults for the zero values of Config.
const (
	DefaultLease = 30 * time.Second
	DefaultPoll  = time.Second
	// MaxChunk caps the items leased and published at once.
	MaxChunk = 2000
	// DefaultWorkers is how many chunks of a batch are on their way at
	// once: one published, the next with its slots, one more leased.
	DefaultWorkers = 3
	// DefaultPublishAttempts is how many times an item is offered to a
	// destination that refuses it for now (a nack, a full queue,
	// throttling) before it fails.
	DefaultPublishAttempts = 5
	// DefaultRetryMin and DefaultRetryMax bound the backoff after such a
	// refusal: full jitter over RetryMin doubled per refusal, capped at
	// RetryMax.
	DefaultRetryMin = time.Second
	DefaultRetryMax = time.Minute
)

// Config is what an Engine needs. Store and Router are required.
type Config struct {
	Store  Store
	Router Router
	// Owner identifies this engine on the leases it takes; a random one
	// when empty.
	Owner string
	// Lease is how long an item stays leased before another engine may
	// publish it again (default 30 s).
	Lease time.Duration
	// Poll is how often the engine looks for batches to run and re-reads
	// a waiting batch (default 1 s).
	Poll time.Duration
	// Workers is how many chunks of one batch this engine has on their
	// way at once (default DefaultWorkers): while one is published, the
	// next ones are leased and the last recorded.
	Workers int
	// PublishAttempts is how many times an item is offered to a
	// destination that answers but refuses it for now (Result.Refused:
	// a nack, a full queue, throttling) before the item fails with the
	// last refusal (default DefaultPublishAttempts). A destination that
	// cannot be reached at all spends no attempt: its items wait.
	PublishAttempts int
	// RetryMin and RetryMax bound the wait after a refusal: a random
	// time up to RetryMin doubled per refusal of the item, at most
	// RetryMax (full jitter; defaults DefaultRetryMin, DefaultRetryMax).
	// A Retry-After from the destination wins when it is longer.
	RetryMin, RetryMax time.Duration
	Logger             *slog.Logger
	Metrics            *Metrics // nil: none
	Now                func() time.Time
	// Guard is the incident guard checked when the engine starts a
	// scheduled batch (nil: none). A batch its guard refuses then is
	// cancelled, with the guard's reason.
	Guard *quarantine.IncidentGuard
}

// Engine runs replay batches. Several engines (processes) may share one
// store: leases keep them from publishing the same item at once, and the
// store's rate buckets give them one budget.
type Engine struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	running map[string]bool      // batches a worker of this engine runs
	held    map[string]time.Time // destinations that asked to wait (429, Retry-After), or are down, until then
	heard   map[string]bool      // destinations that answered a publish of this engine
	wg      sync.WaitGroup
	wake    chan struct{} // Wake: scan now rather than at the next Poll
}

// Wake makes Run look for runnable batches now instead of at its next
// Poll: a batch created or started through this process starts at once.
// It never blocks; wakes before the scan they ask for are one.
func (e *Engine) Wake() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// hold keeps every worker of this engine from publishing to the
// destination label before until, and every other engine sharing the
// store too (the destination's rate bucket is held).
func (e *Engine) hold(ctx context.Context, label string, until time.Time) {
	e.mu.Lock()
	if until.After(e.held[label]) {
		e.held[label] = until
	}
	e.mu.Unlock()
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := e.cfg.Store.HoldReplayTokens(hctx, destBucket(label), until); err != nil {
		e.log.Warn("cannot hold the destination's rate bucket; other instances will learn the wait themselves", "destination", label, "err", err)
	}
}

// destBucket is the key of a destination's shared rate bucket.
func destBucket(label string) string { return "dest:" + label }

// heldFor returns how long the destination label must still wait (0: it
// may be published to).
func (e *Engine) heldFor(label string) time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	until, ok := e.held[label]
	if !ok {
		return 0
	}
	d := time.Until(until)
	if d <= 0 {
		delete(e.held, label)
		return 0
	}
	return d
}

// hear notes that the destination label answered a publish.
func (e *Engine) hear(label string) {
	e.mu.Lock()
	e.heard[label] = true
	e.mu.Unlock()
}

// heardFrom says whether the destination label answered a publish of
// this engine: its publisher is connected, or was.
func (e *Engine) heardFrom(label string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.heard[label]
}

// New returns an engine for cfg, filling defaults. It panics when Store or
// Router is nil (a wiring bug).
func New(cfg Config) *Engine {
	if cfg.Store == nil || cfg.Router == nil {
		panic("replay: Config.Store and Config.Router are required")
	}
	if cfg.Owner == "" {
		b := make([]byte, 8)
		_, _ = rand.Read(b)
		cfg.Owner = "engine-" + hex.EncodeToString(b)
	}
	defaults.Positive(&cfg.Lease, DefaultLease)
	defaults.Positive(&cfg.Poll, DefaultPoll)
	defaults.Positive(&cfg.Workers, DefaultWorkers)
	defaults.Positive(&cfg.PublishAttempts, DefaultPublishAttempts)
	defaults.Positive(&cfg.RetryMin, DefaultRetryMin)
	defaults.Positive(&cfg.RetryMax, DefaultRetryMax)
	cfg.RetryMax = max(cfg.RetryMax, cfg.RetryMin)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Engine{cfg: cfg, log: cfg.Logger.With("component", "replay"), running: map[string]bool{}, held: map[string]time.Time{}, heard: map[string]bool{},
		wake: make(chan struct{}, 1)}
}

// Owner returns the owner token of this engine's leases.
func (e *Engine) Owner() string { return e.cfg.Owner }

// Run looks for running batches every Poll (and at once after a Wake)
// and runs each in a goroutine of its own until ctx ends; it expires drafts past their expiry. It
// returns ctx's error once every worker has stopped (a worker stops after
// the chunk it is publishing, giving back what it leased and did not
// publish).
func (e *Engine) Run(ctx context.Context) error {
	t := time.NewTicker(e.cfg.Poll)
	defer t.Stop()
	for {
		e.scan(ctx)
		select {
		case <-ctx.Done():
			e.wg.Wait()
			return ctx.Err()
		case <-t.C:
		case <-e.wake:
		}
	}
}

// scan starts a worker for each running batch that has none here.
func (e *Engine) scan(ctx context.Context) {
	batches, err := e.cfg.Store.RunnableReplays(ctx, e.cfg.Now())
	if err != nil {
		if ctx.Err() == nil {
			e.log.Warn("cannot list runnable replays", "err", err)
		}
		return
	}
	for _, b := range batches {
		switch b.State {
		case quarantine.ReplayDraft:
			e.system(ctx, b.ID, quarantine.ReplayActExpire, "the draft was not started before it expired")
		case quarantine.ReplayScheduled:
			e.startScheduled(ctx, b)
		case quarantine.ReplayRunning:
			e.mu.Lock()
			busy := e.running[b.ID]
			e.running[b.ID] = true
			e.mu.Unlock()
			if busy {
				continue
			}
			var left sync.WaitGroup
			for range e.cfg.Workers {
				e.wg.Add(1)
				left.Add(1)
				go func(id string) {
					defer e.wg.Done()
					defer left.Done()
					w := &worker{e: e, id: id, breakerBase: -1}
					w.run(ctx)
				}(b.ID)
			}
			go func(id string) {
				left.Wait()
				e.mu.Lock()
				delete(e.running, id)
				e.mu.Unlock()
			}(b.ID)
		}
	}
}

// startScheduled starts the scheduled batch b, due: one engine's start
// wins (the others' are ECONFLICT, as the batch runs already). When the
// incident guard refuses the start, the batch is cancelled with the
// guard's reason: an operator schedules it again, or with force.
func (e *Engine) startScheduled(ctx context.Context, b *quarantine.ReplayBatch) {
	at := "now"
	if b.StartAt != nil {
		at = b.StartAt.UTC().Format(time.RFC3339)
	}
	_, err := e.cfg.Store.ChangeReplay(ctx, quarantine.ReplayChange{BatchID: b.ID, Action: quarantine.ReplayActStart,
		Actor: SystemActor, Reason: "scheduled start at " + at, Guard: e.cfg.Guard, Force: b.StartForce})
	switch {
	case err == nil:
		e.log.Info("replay started as scheduled", "replay", b.ID, "start_at", at)
		e.Wake()
	case quarantine.ErrorCode(err) == quarantine.ECONFLICT && quarantine.ErrorField(err) == "force":
		e.system(ctx, b.ID, quarantine.ReplayActCancel, "the incident guard refused the scheduled start: "+quarantine.ErrorMessage(err))
	case quarantine.ErrorCode(err) != quarantine.ECONFLICT && ctx.Err() == nil:
		e.log.Warn("cannot start a scheduled replay; trying again at the next poll", "replay", b.ID, "err", err)
	}
}

// system applies an action of the engine's own, tolerating that another
// engine or an operator got there first.
func (e *Engine) system(ctx context.Context, id, action, reason string) {
	_, err := e.cfg.Store.ChangeReplay(ctx, quarantine.ReplayChange{BatchID: id, Action: action, Actor: SystemActor, Reason: reason})
	if err != nil && quarantine.ErrorCode(err) != quarantine.ECONFLICT && ctx.Err() == nil {
		e.log.Warn("cannot change replay", "replay", id, "action", action, "err", err)
		return
	}
	if err == nil {
		e.log.Info("replay "+action, "replay", id, "reason", reason)
	}
}

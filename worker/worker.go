package worker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quarantine-dev/quarantine/internal/defaults"
)

// Defaults of Config.
const (
	DefaultClaimLease           = 5 * time.Minute
	DefaultUnknownRetryDelay    = 30 * time.Second
	DefaultUnknownMaxDeliveries = 10
	DefaultDrainTimeout         = 30 * time.Second
	DefaultSettleTimeout        = 30 * time.Second
)

// Config configures a Worker. Only Driver is required.
type Config struct {
	// Driver is the backend: one work queue and its failure queue.
	Driver Driver
	// Claims stores idempotency-key claims. Nil runs every delivery
	// without a claim (at-least-once: a duplicate repeats the effect).
	Claims Claims
	// ClaimLease is how long a claim is held without renewal; the worker
	// renews it every half lease while the handler runs. Default 5 min.
	ClaimLease time.Duration
	// UnknownRetryDelay and UnknownMaxDeliveries: a delivery naming no
	// registered job is retried after UnknownRetryDelay (default 30 s)
	// until its UnknownMaxDeliveries-th delivery (default 10), then
	// dead-lettered as unknown_name. 0 means the default; New refuses a
	// negative value (there is no "no cap": a job nobody registers would
	// circulate for ever).
	UnknownRetryDelay    time.Duration
	UnknownMaxDeliveries int
	// DrainTimeout is how long Run waits, once its context ends, for
	// in-flight handlers to reach a decision before cancelling their
	// contexts (default 30 s). A handler still running DrainTimeout+
	// SettleTimeout later is abandoned: its delivery is left
	// unacknowledged for the backend to redeliver.
	DrainTimeout time.Duration
	// SettleTimeout bounds each settlement (claims and driver), on a
	// context detached from Run's cancellation. Default 30 s.
	SettleTimeout time.Duration
	// Now is the clock (failure envelope times, held-claim delays).
	// Default time.Now.
	Now func() time.Time
	// Logger receives one line per failure and settlement error; never
	// payloads. Default slog.Default() with component=worker.
	Logger *slog.Logger
	// Metrics, when set, is updated with every outcome.
	Metrics *Metrics
	// OnOutcome, when set, is called after the backend accepted each
	// settlement (never for a settlement that failed). It must not block.
	OnOutcome func(Outcome)
}

// Result is what became of a delivery.
type Result int

const (
	// Completed: the handler succeeded, the claim was recorded, acked.
	Completed Result = iota + 1
	// Duplicate: the key was already done; acked without running.
	Duplicate
	// Retried: settled for another delivery after Delay.
	Retried
	// DeadLettered: the failure envelope was published, then settled.
	DeadLettered
	// Rejected: handed to the backend's rejection policy.
	Rejected
)

func (r Result) String() string {
	switch r {
	case Completed:
		return "completed"
	case Duplicate:
		return "duplicate"
	case Retried:
		return "retried"
	case DeadLettered:
		return "dead_lettered"
	case Rejected:
		return "rejected"
	}
	return fmt.Sprintf("Result(%d)", int(r))
}

// Outcome describes one settled delivery, for OnOutcome.
type Outcome struct {
	Result     Result
	Job        string // the job name the delivery carried
	Key        string // its idempotency key
	DeliveryID string
	Attempt    int
	// Class is the retry class (Retried) or failure class (DeadLettered).
	Class string
	// Delay is the retry delay (Retried).
	Delay time.Duration
	// Err is the handler's error, if any.
	Err error
	// Ran reports whether the handler ran for this delivery (also when
	// it was cancelled at shutdown, or its result could not be recorded);
	// false when the delivery was settled without running it.
	Ran bool

	jobLabel string
}

// Worker runs the delivery state machine over one Driver: reserve,
// validate, claim the idempotency key, run the handler, record the result,
// then settle. Register jobs, then call Run.
type Worker struct {
	cfg    Config
	log    *slog.Logger
	owner  string
	seq    atomic.Uint64
	mu     sync.Mutex
	jobs   map[string]*registered
	slots  int
	active atomic.Bool // Run is running
	// abandoned is set when Run gave up on in-flight handlers: they
	// record their claim but settle nothing.
	abandoned atomic.Bool
	// inflight maps each delivery being handled to its metrics label.
	inflight sync.Map
	// claimErrors counts the claims that failed in a row (the claim
	// store unreachable): the backoff of a claim_error retry.
	claimErrors atomic.Int64
}

type registered struct {
	Job
	sem chan struct{}
}

// New returns a worker for cfg. It returns an error when cfg has no
// Driver, a duration or UnknownMaxDeliveries is negative, or the
// unknown-name retry delay does not fit the driver.
func New(cfg Config) (*Worker, error) {
	if cfg.Driver == nil {
		return nil, errors.New("worker: Config.Driver is required")
	}
	for _, c := range []struct {
		name string
		d    time.Duration
	}{{"ClaimLease", cfg.ClaimLease}, {"UnknownRetryDelay", cfg.UnknownRetryDelay}, {"DrainTimeout", cfg.DrainTimeout}, {"SettleTimeout", cfg.SettleTimeout}} {
		if c.d < 0 {
			return nil, fmt.Errorf("worker: Config.%s %s is negative (0 means the default)", c.name, c.d)
		}
	}
	if cfg.UnknownMaxDeliveries < 0 {
		return nil, fmt.Errorf("worker: Config.UnknownMaxDeliveries %d is negative (0 means the default, %d)", cfg.UnknownMaxDeliveries, DefaultUnknownMaxDeliveries)
	}
	defaults.Positive(&cfg.ClaimLease, DefaultClaimLease)
	defaults.Positive(&cfg.UnknownRetryDelay, DefaultUnknownRetryDelay)
	defaults.Positive(&cfg.UnknownMaxDeliveries, DefaultUnknownMaxDeliveries)
	defaults.Positive(&cfg.DrainTimeout, DefaultDrainTimeout)
	defaults.Positive(&cfg.SettleTimeout, DefaultSettleTimeout)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	w := &Worker{cfg: cfg, log: log.With("component", "worker"), jobs: map[string]*registered{}, slots: 1}
	if err := w.checkDelay("unknown job names", cfg.UnknownRetryDelay, false); err != nil {
		return nil, err
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	w.owner = hex.EncodeToString(b)
	return w, nil
}

// Register adds job. It returns an error when the definition is invalid,
// the name is taken, Run has started, or a delay the job can ask for
// (its backoff up to the attempt cap) exceeds what the driver supports:
// a clear error at definition rather than a failed settlement later.
func (w *Worker) Register(job Job) error {
	if err := job.Validate(); err != nil {
		return err
	}
	if w.active.Load() {
		return fmt.Errorf("worker: job %q: register before Run", job.Name)
	}
	d, unbounded, err := maxPolicyDelay(job.policy(), job.MaxAttempts)
	if err != nil {
		return fmt.Errorf("worker: job %q: %w", job.Name, err)
	}
	if err := w.checkDelay("job "+job.Name, d, unbounded); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.jobs[job.Name]; ok {
		return fmt.Errorf("worker: job %q is already registered", job.Name)
	}
	w.jobs[job.Name] = &registered{Job: job, sem: make(chan struct{}, job.concurrency())}
	w.slots += job.concurrency()
	return nil
}

func (w *Worker) checkDelay(what string, d time.Duration, unbounded bool) error {
	lim := w.cfg.Driver.Limits()
	if lim.MaxDelay > 0 {
		if unbounded {
			return fmt.Errorf("worker: %s: backoff has no max and no attempt cap, but the driver allows delays up to %s: set a max", what, lim.MaxDelay)
		}
		if d > lim.MaxDelay {
			return fmt.Errorf("worker: %s: a delay of %s exceeds the driver's maximum of %s", what, d, lim.MaxDelay)
		}
	}
	if v, ok := w.cfg.Driver.(DelayValidator); ok {
		if err := v.ValidateDelay(roundDelay(d, lim)); err != nil {
			return fmt.Errorf("worker: %s: %w", what, err)
		}
	}
	return nil
}

// roundDelay rounds d up to lim.DelayStep and clamps it to lim.MaxDelay.
func roundDelay(d time.Duration, lim Limits) time.Duration {
	d = max(d, 0)
	if s := lim.DelayStep; s > 0 && d%s != 0 {
		d += s - d%s
	}
	if lim.MaxDelay > 0 && d > lim.MaxDelay {
		d = lim.MaxDelay
	}
	return d
}

// Run receives and handles deliveries until ctx ends, then stops
// receiving, gives in-flight handlers DrainTimeout to finish, cancels
// their contexts, and returns once they settled or SettleTimeout more has
// passed (those still running are abandoned, unacknowledged). It returns
// nil after a clean drain, or an error saying how many deliveries were
// abandoned. A Worker runs once.
func (w *Worker) Run(ctx context.Context) error {
	if !w.active.CompareAndSwap(false, true) {
		return errors.New("worker: Run called twice")
	}
	hctx, cancelHandlers := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelHandlers()
	sem := make(chan struct{}, w.slots)
	var inflight sync.WaitGroup
	var running atomic.Int64
	for ctx.Err() == nil {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			continue
		}
		n := 1
	grab:
		for n < cap(sem) {
			select {
			case sem <- struct{}{}:
				n++
			default:
				break grab
			}
		}
		ds, err := w.cfg.Driver.Receive(ctx, n)
		for i := len(ds); i < n; i++ {
			<-sem
		}
		if err != nil && ctx.Err() == nil {
			w.log.Warn("receive failed", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
		for _, d := range ds {
			inflight.Add(1)
			running.Add(1)
			go func() {
				defer func() { <-sem; running.Add(-1); inflight.Done() }()
				w.handle(ctx, hctx, d)
			}()
		}
	}
	done := make(chan struct{})
	go func() { inflight.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-time.After(w.cfg.DrainTimeout):
	}
	cancelHandlers()
	select {
	case <-done:
		return nil
	case <-time.After(w.cfg.SettleTimeout):
	}
	w.abandoned.Store(true)
	n := running.Load()
	w.inflight.Range(func(_, label any) bool {
		w.cfg.Metrics.abandon(label.(string))
		return true
	})
	w.log.Warn("drain deadline passed: deliveries left unacknowledged", "count", n)
	return fmt.Errorf("worker: %d deliveries still running at the drain deadline were left unacknowledged", n)
}

// ConsumeOne runs one delivery through the whole state machine, on the
// calling goroutine: validate it, claim its idempotency key in the
// worker's Claims, run the registered handler, record the result and
// settle it through the Driver (ack, retry, dead-letter). It returns the
// outcome the backend accepted, as OnOutcome receives it, or an error
// when nothing was settled (the settlement failed or the claim store was
// unreachable: the backend redelivers). Run uses the same step for every
// delivery; ConsumeOne lets a consumer test its handler against real
// claims and a real driver, one delivery at a time, without the
// concurrent loop. ctx is both the handler's context and the one
// settlement detaches from.
func (w *Worker) ConsumeOne(ctx context.Context, d *Delivery) (Outcome, error) {
	if d == nil {
		return Outcome{}, errors.New("worker: ConsumeOne of a nil delivery")
	}
	o := w.handle(ctx, ctx, d)
	if o == nil {
		return Outcome{}, fmt.Errorf("worker: delivery %s was not settled (see the log); the backend redelivers it", d.ID)
	}
	return *o, nil
}

func (w *Worker) lookup(name string) *registered {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.jobs[name]
}

func (w *Worker) newOwner() string {
	return fmt.Sprintf("%s-%d", w.owner, w.seq.Add(1))
}

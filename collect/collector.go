package collect

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/backoff"
	"github.com/quarantine-dev/quarantine/internal/defaults"
)

// Inserter is the part of the store a collector needs.
type Inserter interface {
	InsertBatch(ctx context.Context, msgs []*quarantine.Message) ([]quarantine.InsertResult, error)
}

// Defaults of Config.
const (
	DefaultBatchSize     = 500
	DefaultLinger        = 200 * time.Millisecond
	DefaultMinBackoff    = 100 * time.Millisecond
	DefaultMaxBackoff    = 30 * time.Second
	DefaultCommitTimeout = 30 * time.Second
	DefaultCommits       = 2
)

// Config wires one collector.
type Config struct {
	Name     string
	Source   Source
	Store    Inserter
	Preparer *Preparer
	// BatchSize and Linger bound a batch: up to BatchSize messages, or what
	// arrived within Linger of the first.
	BatchSize int
	Linger    time.Duration
	// MinBackoff and MaxBackoff bound the jittered exponential backoff
	// after a failed receive or a failed commit.
	MinBackoff, MaxBackoff time.Duration
	// CommitTimeout bounds one InsertBatch attempt.
	CommitTimeout time.Duration
	// Commits is how many batches may be committing at once, each in its
	// own transaction (default 2). While one transaction waits for its
	// WAL flush or its locks, the next one does its inserts. Batches are
	// still acknowledged in the order they were received: a batch whose
	// commit returns first waits for the commits received before it.
	Commits int
	Logger  *slog.Logger
	Metrics *Metrics // nil: no Prometheus metrics
	Now     func() time.Time
}

// Collector drains one Source into the store: receive a batch, prepare
// it, insert it in one transaction, then acknowledge exactly the messages
// that committed. Nothing is acknowledged on a guess: when the store fails,
// the collector keeps the batch, acknowledges nothing, backs off and tries
// again; it never rejects or requeues.
type Collector struct {
	cfg Config
	log *slog.Logger

	mu    sync.Mutex
	stats Stats
}

// Stats is a snapshot of a collector's health, for the metrics and alerts.
type Stats struct {
	Name              string            `json:"name"`
	Received          uint64            `json:"received"`
	Stored            uint64            `json:"stored"`
	Duplicates        uint64            `json:"duplicates"`
	Errors            map[string]uint64 `json:"errors"` // by kind: receive, store, ack
	LastBatchAt       time.Time         `json:"last_batch_at"`
	LastBatchDuration time.Duration     `json:"last_batch_duration"`
	LastError         string            `json:"last_error,omitempty"`
	LastErrorAt       time.Time         `json:"last_error_at"`
}

// Error kinds counted in Stats.Errors.
const (
	ErrReceive = "receive"
	ErrStore   = "store"
	ErrAck     = "ack"
)

// New returns a collector; Run starts it.
func New(cfg Config) *Collector {
	defaults.Positive(&cfg.BatchSize, DefaultBatchSize)
	defaults.Positive(&cfg.Linger, DefaultLinger)
	defaults.Range(&cfg.MinBackoff, &cfg.MaxBackoff, DefaultMinBackoff, DefaultMaxBackoff)
	defaults.Positive(&cfg.CommitTimeout, DefaultCommitTimeout)
	defaults.Positive(&cfg.Commits, DefaultCommits)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	c := &Collector{cfg: cfg, log: log.With("component", "collector", "collector", cfg.Name)}
	c.stats = Stats{Name: cfg.Name, Errors: map[string]uint64{}}
	cfg.Metrics.start(cfg.Name)
	return c
}

// Name returns the collector's name.
func (c *Collector) Name() string { return c.cfg.Name }

// Stats returns a snapshot of the collector's counters.
func (c *Collector) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Errors = make(map[string]uint64, len(c.stats.Errors))
	for k, v := range c.stats.Errors {
		s.Errors[k] = v
	}
	return s
}

// Run drains the source until ctx ends, then commits the batches it
// already received (and acknowledges what committed, if the store
// answers) and returns nil. The source is not closed; its owner closes it.
//
// Receiving and committing overlap: while Commits batches are being
// committed, the next is received, so the broker's round trip is hidden
// behind the store's. At most one batch waits ahead, and it is kept from
// expiring like the batches being committed. A source therefore holds up
// to Commits+1 batches unacknowledged (see Windowed).
func (c *Collector) Run(ctx context.Context) error {
	c.log.Info("collector started", "batch_size", c.cfg.BatchSize, "linger", c.cfg.Linger, "commits", c.cfg.Commits)
	defer c.log.Info("collector stopped")
	if w, ok := c.cfg.Source.(Windowed); ok {
		w.SetWindow((c.cfg.Commits + 1) * c.cfg.BatchSize)
	}
	batches := make(chan batch)
	go c.receive(ctx, batches)
	order := newTurns()
	var wg sync.WaitGroup
	for range c.cfg.Commits {
		wg.Go(func() {
			for b := range batches {
				c.commit(ctx, b, order)
			}
		})
	}
	wg.Wait()
	return nil
}

// batch is a received batch and its place in the order of receipt.
type batch struct {
	seq uint64
	ds  []Delivery
}

// turns passes the turn to acknowledge from batch to batch in the order
// they were received, so that concurrent commits still acknowledge in
// order: a RabbitMQ source then acknowledges each batch with one multiple
// ack instead of one ack per message. A committed batch waits only for
// the commits of the batches received before it.
type turns struct {
	mu   sync.Mutex
	cond *sync.Cond
	next uint64 // the batch whose turn it is
}

func newTurns() *turns {
	t := &turns{}
	t.cond = sync.NewCond(&t.mu)
	return t
}

// take waits for batch seq's turn.
func (t *turns) take(seq uint64) {
	t.mu.Lock()
	for t.next != seq {
		t.cond.Wait()
	}
	t.mu.Unlock()
}

// pass gives the turn to the batch after seq.
func (t *turns) pass(seq uint64) {
	t.mu.Lock()
	t.next = seq + 1
	t.cond.Broadcast()
	t.mu.Unlock()
}

// receive feeds batches, numbered in order, until ctx ends, then closes
// the channel.
func (c *Collector) receive(ctx context.Context, batches chan<- batch) {
	defer close(batches)
	failures := 0
	var seq uint64
	for ctx.Err() == nil {
		ds, err := c.cfg.Source.Receive(ctx, c.cfg.BatchSize, c.cfg.Linger)
		if len(ds) > 0 {
			c.handOver(ctx, batches, batch{seq, ds})
			seq++
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			failures++
			c.fail(ErrReceive, err)
			c.sleep(ctx, failures)
			continue
		}
		failures = 0
	}
}

// handOver waits until a committer takes b, extending it meanwhile
// when the source needs it. A received batch is always handed over, even
// after ctx ends: the committer commits it before Run returns.
func (c *Collector) handOver(ctx context.Context, batches chan<- batch, b batch) {
	ex, ok := c.cfg.Source.(Extender)
	if !ok || ex.ExtendEvery() <= 0 {
		batches <- b
		return
	}
	t := time.NewTicker(ex.ExtendEvery())
	defer t.Stop()
	for {
		select {
		case batches <- b:
			return
		case <-t.C:
			if err := ex.Extend(context.WithoutCancel(ctx), b.ds); err != nil {
				c.log.Warn("could not extend held deliveries", "err", err)
			}
		}
	}
}

// commit stores b and acknowledges it in its turn, retrying the insert
// until it succeeds or ctx ends. After ctx ends it still makes one
// attempt: a batch that was received is committed and acknowledged if the
// store answers, and otherwise left to the broker to redeliver. Either
// way it passes the turn on.
func (c *Collector) commit(ctx context.Context, b batch, order *turns) {
	defer order.pass(b.seq)
	work := context.WithoutCancel(ctx)
	msgs := make([]*quarantine.Message, len(b.ds))
	for i, d := range b.ds {
		c.cfg.Preparer.Prepare(d.Message)
		msgs[i] = d.Message
	}
	c.count(func(s *Stats) { s.Received += uint64(len(b.ds)) })
	c.cfg.Metrics.received(c.cfg.Name, len(b.ds))

	stopExtend := c.extend(work, b.ds) // until acknowledged, the wait for the turn included
	defer stopExtend()
	res, took, ok := c.insert(ctx, msgs)
	order.take(b.seq)
	if ok {
		c.committed(work, b.ds, res, took)
	}
}

// insert stores msgs, retrying until it succeeds (ok) or ctx ends (one
// attempt is still made after that).
func (c *Collector) insert(ctx context.Context, msgs []*quarantine.Message) (res []quarantine.InsertResult, took time.Duration, ok bool) {
	work := context.WithoutCancel(ctx)
	for attempt := 1; ; attempt++ {
		start := time.Now()
		ictx, cancel := context.WithTimeout(work, c.cfg.CommitTimeout)
		res, err := c.cfg.Store.InsertBatch(ictx, msgs)
		cancel()
		if err == nil {
			return res, time.Since(start), true
		}
		c.fail(ErrStore, err)
		if ctx.Err() != nil {
			c.log.Warn("stopping with an uncommitted batch: the broker will redeliver it", "messages", len(msgs))
			return nil, 0, false
		}
		c.log.Warn("store failed: nothing acknowledged, retrying the batch", "messages", len(msgs), "attempt", attempt, "err", err)
		c.sleep(ctx, attempt)
	}
}

func (c *Collector) committed(ctx context.Context, ds []Delivery, res []quarantine.InsertResult, took time.Duration) {
	stored := 0
	byQueue := map[string]int{}
	for i, r := range res {
		if r.New {
			stored++
			if i < len(ds) && ds[i].Message != nil {
				byQueue[ds[i].Message.Queue]++
			}
		}
	}
	actx, cancel := context.WithTimeout(ctx, c.cfg.CommitTimeout)
	err := c.cfg.Source.Ack(actx, ds)
	cancel()
	if err != nil {
		// Committed but not acknowledged: the broker redelivers and the
		// dedupe key makes the repeat a no-op.
		c.fail(ErrAck, err)
	}
	now := c.cfg.Now()
	c.count(func(s *Stats) {
		s.Stored += uint64(stored)
		s.Duplicates += uint64(len(ds) - stored)
		s.LastBatchAt = now
		s.LastBatchDuration = took
	})
	c.cfg.Metrics.batch(c.cfg.Name, stored, len(ds)-stored, took, now)
	c.cfg.Metrics.ingested(c.cfg.Name, byQueue)
}

// extend keeps held deliveries from expiring while the batch waits for
// the store, when the source needs it. It returns a stop function.
func (c *Collector) extend(ctx context.Context, ds []Delivery) func() {
	ex, ok := c.cfg.Source.(Extender)
	if !ok || ex.ExtendEvery() <= 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(ex.ExtendEvery())
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := ex.Extend(ctx, ds); err != nil && ctx.Err() == nil {
					c.log.Warn("could not extend held deliveries", "err", err)
				}
			}
		}
	}()
	return func() { cancel(); <-done }
}

func (c *Collector) fail(kind string, err error) {
	now := c.cfg.Now()
	c.count(func(s *Stats) {
		s.Errors[kind]++
		s.LastError = kind + ": " + err.Error()
		s.LastErrorAt = now
	})
	c.cfg.Metrics.failed(c.cfg.Name, kind)
	if kind != ErrStore { // store failures are logged with their attempt
		c.log.Warn("collector error", "kind", kind, "err", err)
	}
}

func (c *Collector) count(f func(*Stats)) {
	c.mu.Lock()
	f(&c.stats)
	c.mu.Unlock()
}

// sleep waits the jittered backoff for the n-th consecutive failure, or
// until ctx ends.
func (c *Collector) sleep(ctx context.Context, n int) {
	t := time.NewTimer(Backoff(n, c.cfg.MinBackoff, c.cfg.MaxBackoff))
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// Backoff returns the wait before retry n (1-based): a random duration
// between half and all of min*2^(n-1), capped at max ("equal jitter"), so
// that collectors sharing a failed store do not retry in step.
func Backoff(n int, min, max time.Duration) time.Duration {
	return backoff.Equal(n, min, 2, max)
}

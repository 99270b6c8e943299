package alert

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/backoff"
	"github.com/quarantine-dev/quarantine/store"
)

// AgeStore is what the age sampler needs of the store.
type AgeStore interface {
	SampleAges(ctx context.Context, now time.Time) (quarantine.AgeSampleResult, error)
	PruneAgeSamples(ctx context.Context, before time.Time) (int64, error)
}

var _ AgeStore = store.Store(nil)

// AgeSamplerConfig configures an AgeSampler.
type AgeSamplerConfig struct {
	Store AgeStore
	// Keep is how long samples are kept (default
	// quarantine.DefaultAgeHistoryKeep, 7 days).
	Keep time.Duration
	// Now is the clock (default time.Now).
	Now    func() time.Time
	Logger *slog.Logger
}

// AgeSampler records the age of each queue's oldest dead letter once a
// minute (the overview's chart of dead-letter age over time) and prunes
// the samples older than Keep once an hour. It needs no lock: the store
// takes each minute once, whichever instance comes first.
type AgeSampler struct {
	cfg     AgeSamplerConfig
	log     *slog.Logger
	steps   atomic.Uint64
	pruneAt time.Time
}

// NewAgeSampler returns a sampler of cfg.Store.
func NewAgeSampler(cfg AgeSamplerConfig) *AgeSampler {
	if cfg.Keep <= 0 {
		cfg.Keep = quarantine.DefaultAgeHistoryKeep
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &AgeSampler{cfg: cfg, log: cfg.Logger.With("component", "age-sampler")}
}

// Steps is the number of steps that returned, whatever their outcome: a
// test waits on it instead of sleeping past a minute.
func (a *AgeSampler) Steps() uint64 { return a.steps.Load() }

// Step samples the ages at the clock's now and, when an hour has passed
// since the last prune (or none was made), prunes the samples older than
// Keep.
func (a *AgeSampler) Step(ctx context.Context) (quarantine.AgeSampleResult, error) {
	defer a.steps.Add(1)
	now := a.cfg.Now()
	res, err := a.cfg.Store.SampleAges(ctx, now)
	if err != nil {
		return res, err
	}
	if !now.Before(a.pruneAt) {
		a.pruneAt = now.Add(time.Hour)
		if _, err := a.cfg.Store.PruneAgeSamples(ctx, now.Add(-a.cfg.Keep)); err != nil {
			return res, err
		}
	}
	return res, nil
}

// Run steps at the start and then a second into every minute, until ctx
// ends (it returns nil then).
func (a *AgeSampler) Run(ctx context.Context) error {
	for {
		if _, err := a.Step(ctx); err != nil && ctx.Err() == nil {
			a.log.Warn("cannot sample the dead-letter ages", "err", err)
		}
		now := time.Now()
		if !backoff.Sleep(ctx, now.Truncate(time.Minute).Add(time.Minute+time.Second).Sub(now)) {
			return nil
		}
	}
}

package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quarantine-dev/quarantine"
)

// RetentionConfig is the `retention:` key: a message replayed (or
// discarded) longer ago than Replayed (Discarded) loses its payload bytes
// to a purge run every Every; its hashes, sizes and versions stay. Zero
// keeps those payloads forever.
type RetentionConfig struct {
	Replayed  time.Duration
	Discarded time.Duration
	Every     time.Duration
}

// Retention purges run as this audit actor.
const retentionActor = "system:retention"

// retentionBatch is how many messages one purge transaction takes.
const retentionBatch = 500

// purger is what the retention loop needs of the store.
type purger interface {
	PurgePayloads(ctx context.Context, st quarantine.Status, before time.Time, limit int, actor string) (quarantine.PurgeResult, error)
	PurgeSessions(ctx context.Context) (int64, error)
}

// retention removes the payloads of replayed and discarded messages past
// their retention, in batches, every cfg.Every. Each batch is one store
// transaction with its retention.purge audit event listing the ids. Each
// pass also deletes the web UI's ended sessions (whatever the payloads'
// retention: the loop runs even when it keeps every payload).
type retention struct {
	store  purger
	cfg    RetentionConfig
	now    func() time.Time
	log    *slog.Logger
	batch  int
	purged *prometheus.CounterVec // by status; nil counts nothing

	cancel context.CancelFunc
	done   chan struct{}
}

// newRetention returns a loop over st; reg (optional) receives its
// counter quarantine_retention_purged_total{status}.
func newRetention(st purger, cfg RetentionConfig, log *slog.Logger, reg prometheus.Registerer) *retention {
	r := &retention{store: st, cfg: cfg, now: time.Now, log: log.With("component", "retention"), batch: retentionBatch}
	if reg != nil {
		r.purged = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quarantine_retention_purged_total",
			Help: "Payloads removed by the retention purge, by the message's status.",
		}, []string{"status"})
		reg.MustRegister(r.purged)
	}
	return r
}

// start runs the loop in the background: one purge now, then one every
// cfg.Every, until stop.
func (r *retention) start() {
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel, r.done = cancel, make(chan struct{})
	go func() {
		defer close(r.done)
		t := time.NewTicker(r.cfg.Every)
		defer t.Stop()
		for {
			r.purge(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// stop ends the loop and waits for a purge in flight (its transaction
// commits or rolls back whole). Safe to call when not started.
func (r *retention) stop() {
	if r == nil || r.cancel == nil {
		return
	}
	r.cancel()
	<-r.done
}

// purge runs one pass over both statuses and returns how many payloads
// it removed, then deletes the ended sessions. Errors are logged; the
// next pass tries again.
func (r *retention) purge(ctx context.Context) int {
	defer r.purgeSessions(ctx)
	total := 0
	for _, s := range []struct {
		status quarantine.Status
		after  time.Duration
	}{{quarantine.StatusReplayed, r.cfg.Replayed}, {quarantine.StatusDiscarded, r.cfg.Discarded}} {
		if s.after <= 0 {
			continue
		}
		before := r.now().Add(-s.after)
		for ctx.Err() == nil {
			res, err := r.store.PurgePayloads(ctx, s.status, before, r.batch, retentionActor)
			if err != nil {
				if ctx.Err() == nil {
					r.log.Error("retention purge failed", "status", s.status, "err", err)
				}
				break
			}
			n := len(res.Purged)
			total += n
			if n > 0 {
				r.log.Info("purged payloads", "status", s.status, "count", n, "before", before)
				if r.purged != nil {
					r.purged.WithLabelValues(string(s.status)).Add(float64(n))
				}
			}
			if n < r.batch {
				break
			}
		}
	}
	return total
}

// purgeSessions deletes the sessions that have ended (by the store's
// clock).
func (r *retention) purgeSessions(ctx context.Context) {
	n, err := r.store.PurgeSessions(ctx)
	switch {
	case err != nil && ctx.Err() == nil:
		r.log.Error("session purge failed", "err", err)
	case n > 0:
		r.log.Debug("purged ended sessions", "count", n)
	}
}

// decodeRetention reads the retention keys that are set into r.
func (s *configSource) decodeRetention(f fileRetention, r *RetentionConfig) error {
	for _, k := range []struct {
		key  string
		v    any
		dst  *time.Duration
		zero bool // 0 is allowed: keep forever
	}{
		{"retention.replayed", f.Replayed, &r.Replayed, true},
		{"retention.discarded", f.Discarded, &r.Discarded, true},
		{"retention.every", f.Every, &r.Every, false},
	} {
		if k.v == nil {
			continue
		}
		d, problem := parseRetention(k.v, k.zero)
		if problem != "" {
			return s.errorf(k.key, "%s", problem)
		}
		*k.dst = d
	}
	return nil
}

// configDuration reads a duration-valued configuration key as YAML gives
// it: a string in quarantine.ParseDuration's syntax (90s, 720h, 30d,
// 1d12h), or the number 0. Any other number has no unit and is an error.
func configDuration(v any) (time.Duration, error) {
	switch x := v.(type) {
	case string:
		return quarantine.ParseDuration(x)
	case uint64:
		if x == 0 {
			return 0, nil
		}
	case int64:
		if x == 0 {
			return 0, nil
		}
	}
	return 0, fmt.Errorf("%v is not a duration", v)
}

// parseRetention parses a non-negative duration (configDuration), 0 only
// when zero is allowed. It returns a problem text.
func parseRetention(v any, zero bool) (time.Duration, string) {
	want := "a duration like 720h or 30d"
	if zero {
		want += ", or 0 to keep the payloads"
	}
	d, err := configDuration(v)
	_, text := v.(string)
	switch {
	case err != nil && !text && !isNumber(v):
		return 0, "expected " + want
	case err != nil && isNumber(v):
		return 0, fmt.Sprintf("%v has no unit: give %s", v, want)
	case err != nil:
		return 0, fmt.Sprintf("%q is not %s", fmt.Sprint(v), want)
	case d < 0 || (d == 0 && !zero):
		return 0, fmt.Sprintf("%q is not %s", fmt.Sprint(v), want)
	}
	return d, ""
}

func isNumber(v any) bool {
	switch v.(type) {
	case uint64, int64, float64:
		return true
	}
	return false
}

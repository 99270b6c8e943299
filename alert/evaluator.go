package alert

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/backoff"
	"github.com/quarantine-dev/quarantine/internal/defaults"
	"github.com/quarantine-dev/quarantine/store"
)

// Defaults of Config.
const (
	DefaultInterval   = 15 * time.Second
	DefaultResend     = time.Minute // Prometheus's resend delay
	DefaultBackoff    = time.Second
	DefaultMaxBackoff = 5 * time.Minute
	DefaultKeep       = 7 * 24 * time.Hour // delivered notifications kept in the outbox
)

// Store is what the evaluator needs of the store: the queue statistics
// (index-backed) and the alarm state.
type Store interface {
	QueueStats(ctx context.Context, f quarantine.Filter, now time.Time) ([]quarantine.QueueStats, error)
	store.Alarms
}

var _ Store = store.Store(nil)

// Config configures an Evaluator.
type Config struct {
	Store     Store
	Rules     []Rule
	Receivers []Receiver
	// Owner returns a queue's owner (the owner rules); nil: no owners.
	Owner func(queue string) string
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Interval between evaluations (default 15 s).
	Interval time.Duration
	// Resend is how often a firing alarm is re-sent to Alertmanager
	// (default 1 m); its endsAt is 4 times the larger of Resend and
	// Interval ahead, as Prometheus sets it.
	Resend time.Duration
	// Backoff is the first retry delay of a failed delivery, doubling up
	// to MaxBackoff (defaults 1 s and 5 m).
	Backoff, MaxBackoff time.Duration
	// Keep is how long delivered (and failed) notifications stay in the
	// outbox before Run purges them (default 7 days).
	Keep   time.Duration
	Logger *slog.Logger
	// PublicURL is the UI's base URL as its users reach it (config
	// public_url): every notification links to the alarm's messages
	// there (MessagesURL). Empty: no link.
	PublicURL string
	// RunbookURL is the runbook's URL (default DefaultRunbookURL); a
	// rule's Runbook replaces it.
	RunbookURL string
}

// DefaultRunbookURL is the runbook a notification links to when the
// configuration names none.
const DefaultRunbookURL = "https://github.com/quarantine-dev/quarantine/blob/main/docs/alarms.md#runbook"

// Evaluator evaluates the rules and delivers the notifications they owe.
type Evaluator struct {
	cfg       Config
	rules     []Rule
	receivers map[string]*Receiver
	log       *slog.Logger
	evaluated atomic.Uint64 // evaluations that returned (Evaluations)
}

// Evaluations is the number of evaluations that returned, whatever their
// outcome: a test waits on it instead of sleeping past an interval.
func (e *Evaluator) Evaluations() uint64 { return e.evaluated.Load() }

// New checks cfg and returns an evaluator. EINVALID for a rule that does
// not validate, two rules with one name, or a rule naming an unknown
// receiver.
func New(cfg Config) (*Evaluator, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	defaults.Positive(&cfg.Interval, DefaultInterval)
	defaults.Positive(&cfg.Resend, DefaultResend)
	defaults.Range(&cfg.Backoff, &cfg.MaxBackoff, DefaultBackoff, DefaultMaxBackoff)
	defaults.Positive(&cfg.Keep, DefaultKeep)
	if cfg.Owner == nil {
		cfg.Owner = func(string) string { return "" }
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	e := &Evaluator{cfg: cfg, rules: cfg.Rules, receivers: map[string]*Receiver{}, log: cfg.Logger.With("component", "alert")}
	for i := range cfg.Receivers {
		r := &cfg.Receivers[i]
		if err := r.init(); err != nil {
			return nil, err
		}
		if _, dup := e.receivers[r.Name]; dup {
			return nil, quarantine.FieldErrorf(quarantine.EINVALID, "receivers", "two receivers are named %q", r.Name)
		}
		e.receivers[r.Name] = r
	}
	names := map[string]bool{}
	for i := range e.rules {
		r := &e.rules[i]
		if err := r.Validate(); err != nil {
			return nil, err
		}
		if names[r.Name] {
			return nil, quarantine.FieldErrorf(quarantine.EINVALID, "name", "two alarms are named %q", r.Name)
		}
		names[r.Name] = true
		for _, rc := range r.Receivers {
			if e.receivers[rc] == nil {
				return nil, quarantine.FieldErrorf(quarantine.EINVALID, "receivers", "alarm %q names no receiver %q", r.Name, rc)
			}
		}
	}
	return e, nil
}

// Rules returns the configured rules.
func (e *Evaluator) Rules() []Rule { return e.rules }

type stateKey struct{ alarm, queue string }

// Evaluate runs one evaluation: it reads the queue statistics and the
// stored states, moves each rule's state on each queue it covers, and
// saves the changed states with the notifications they owe in one
// transaction. The caller must hold the alarm lock (Run does).
func (e *Evaluator) Evaluate(ctx context.Context) error {
	defer e.evaluated.Add(1)
	now := e.cfg.Now().UTC().Truncate(time.Microsecond)
	stats, err := e.cfg.Store.QueueStats(ctx, quarantine.Filter{}, now)
	if err != nil {
		return err
	}
	stored, err := e.cfg.Store.AlarmStates(ctx)
	if err != nil {
		return err
	}
	known := make(map[stateKey]quarantine.AlarmState, len(stored))
	for _, st := range stored {
		known[stateKey{st.Alarm, st.Queue}] = st
	}
	var save []quarantine.AlarmState
	var notes []quarantine.AlarmNotification
	for i := range e.rules {
		r := &e.rules[i]
		seen := map[string]bool{}
		move := func(queue, owner string, v values) {
			seen[queue] = true
			old, ok := known[stateKey{r.Name, queue}]
			if !ok {
				if r.breach(v) == "" {
					return // nothing to remember
				}
				old = quarantine.AlarmState{Alarm: r.Name, Queue: queue, State: quarantine.AlarmInactive, Since: now}
			}
			old.Owner = owner
			st, kinds := step(r, old, v, now, e.resend(r))
			save = append(save, st)
			for _, k := range kinds {
				notes = append(notes, e.notes(r, st, k, now)...)
			}
			if len(kinds) > 0 || st.State != old.State {
				e.log.Info("alarm", "alarm", r.Name, "queue", queue, "owner", owner, "from", old.State, "to", st.State, "reason", st.Reason)
			}
		}
		for _, qs := range stats {
			owner := e.cfg.Owner(qs.Queue)
			if r.Matches(qs.Queue, owner) {
				move(qs.Queue, owner, valuesOf(qs, now))
			}
		}
		// A stored state whose queue has no message left, or that the rule
		// no longer covers, is measured as empty (it resolves).
		for _, st := range stored {
			if st.Alarm == r.Name && !seen[st.Queue] {
				move(st.Queue, st.Owner, values{})
			}
		}
	}
	if len(save) == 0 && len(notes) == 0 {
		return nil
	}
	return e.cfg.Store.SaveAlarms(ctx, save, notes)
}

// resend is the Alertmanager re-send period of r (0 when it has no
// Alertmanager receiver).
func (e *Evaluator) resend(r *Rule) time.Duration {
	for _, name := range r.Receivers {
		if e.receivers[name].Kind == KindAlertmanager {
			return e.cfg.Resend
		}
	}
	return 0
}

// notes are the notifications of kind for st, one per receiver that
// takes that kind.
func (e *Evaluator) notes(r *Rule, st quarantine.AlarmState, kind quarantine.AlarmKind, now time.Time) []quarantine.AlarmNotification {
	var out []quarantine.AlarmNotification
	ev := event(st, kind, now)
	ev.URL = MessagesURL(e.cfg.PublicURL, r, st, kind)
	ev.RunbookURL = cmp.Or(r.Runbook, e.cfg.RunbookURL, DefaultRunbookURL)
	for _, name := range r.Receivers {
		rc := e.receivers[name]
		if !rc.takes(kind) {
			continue
		}
		out = append(out, quarantine.AlarmNotification{Receiver: name, Kind: kind, Event: ev, NextAttemptAt: now})
	}
	return out
}

// Deliver sends the pending notifications that are due, each receiver's
// in the order they were queued: a receiver whose oldest pending one is
// not due yet, or fails, gets no later one in this round. A failure that
// may pass (network, 429, 5xx) is retried after a doubling backoff; a
// refusal (another 4xx) is recorded as failed. Returns when the next
// retry is due (zero when none waits). The caller must hold the lock.
func (e *Evaluator) Deliver(ctx context.Context) (time.Time, error) {
	pending, err := e.cfg.Store.PendingAlarmNotifications(ctx, 500)
	if err != nil {
		return time.Time{}, err
	}
	var next time.Time
	later := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	blocked := map[string]bool{}
	for _, n := range pending {
		if blocked[n.Receiver] {
			continue
		}
		now := e.cfg.Now().UTC()
		if n.NextAttemptAt.After(now) {
			blocked[n.Receiver] = true
			later(n.NextAttemptAt)
			continue
		}
		rc := e.receivers[n.Receiver]
		var a quarantine.AlarmAttempt
		if rc == nil {
			a = quarantine.AlarmAttempt{Err: "no receiver named " + n.Receiver + " is configured", GiveUp: true}
		} else if err := rc.Notify(ctx, n, now, e.hold()); err == nil {
			a.Delivered = true
		} else {
			if ctx.Err() != nil {
				return next, ctx.Err()
			}
			var de *DeliveryError
			giveUp := errors.As(err, &de) && !de.Retry
			a = quarantine.AlarmAttempt{Err: err.Error(), GiveUp: giveUp, Next: now.Add(e.backoff(n.Attempts + 1))}
			e.log.Warn("alarm notification failed", "receiver", n.Receiver, "alarm", n.Event.Alarm, "queue", n.Event.Queue,
				"kind", n.Kind, "attempt", n.Attempts+1, "retry", !giveUp, "err", err)
			if !giveUp {
				blocked[n.Receiver] = true
				later(a.Next)
			}
		}
		if err := e.cfg.Store.RecordAlarmDelivery(ctx, n.ID, a); err != nil {
			return next, err
		}
	}
	return next, nil
}

// hold is how far ahead a firing alert's endsAt is set for Alertmanager.
func (e *Evaluator) hold() time.Duration { return 4 * max(e.cfg.Resend, e.cfg.Interval) }

// backoff is the delay before attempt n+1 after n failed ones.
func (e *Evaluator) backoff(n int) time.Duration {
	return backoff.Ceiling(n, e.cfg.Backoff, 2, e.cfg.MaxBackoff)
}

// Step evaluates once and delivers what is due; the caller holds the lock.
func (e *Evaluator) Step(ctx context.Context) (time.Time, error) {
	if err := e.Evaluate(ctx); err != nil {
		return time.Time{}, err
	}
	return e.Deliver(ctx)
}

// Run evaluates every Interval while it holds the store's alarm lock,
// until ctx ends (it returns nil then). An instance that does not hold
// the lock tries again every Interval, so that it takes over when the
// holder stops or loses its database connection.
func (e *Evaluator) Run(ctx context.Context) error {
	for {
		lock, err := e.cfg.Store.LockAlarms(ctx)
		switch {
		case err == nil:
			e.log.Info("evaluating alarms", "rules", len(e.rules))
			e.lead(ctx, lock)
			lock.Release()
		case quarantine.ErrorCode(err) != quarantine.ECONFLICT && ctx.Err() == nil:
			e.log.Warn("cannot take the alarm lock", "err", err)
		}
		if !backoff.Sleep(ctx, e.cfg.Interval) {
			return nil
		}
	}
}

// Purge deletes the delivered and failed notifications older than Keep.
func (e *Evaluator) Purge(ctx context.Context) (int64, error) {
	return e.cfg.Store.PurgeAlarmNotifications(ctx, e.cfg.Now().Add(-e.cfg.Keep))
}

// lead evaluates and delivers until ctx ends or the lock is lost, and
// purges the outbox once an hour.
func (e *Evaluator) lead(ctx context.Context, lock quarantine.AlarmLock) {
	nextEval, nextPurge := time.Now(), time.Now()
	for {
		if !time.Now().Before(nextPurge) {
			nextPurge = time.Now().Add(time.Hour)
			if _, err := e.Purge(ctx); err != nil && ctx.Err() == nil {
				e.log.Warn("cannot purge delivered alarm notifications", "err", err)
			}
		}
		if err := lock.Check(ctx); err != nil {
			if ctx.Err() == nil {
				e.log.Warn("lost the alarm lock", "err", err)
			}
			return
		}
		var retry time.Time
		var err error
		if !time.Now().Before(nextEval) {
			nextEval = time.Now().Add(e.cfg.Interval)
			retry, err = e.Step(ctx)
		} else {
			retry, err = e.Deliver(ctx)
		}
		if err != nil && ctx.Err() == nil {
			e.log.Warn("alarm evaluation failed", "err", err)
		}
		wait := time.Until(nextEval)
		if !retry.IsZero() {
			// retry is on the evaluator's clock; compare on it.
			if d := retry.Sub(e.cfg.Now()); d < wait {
				wait = max(d, 10*time.Millisecond)
			}
		}
		if !backoff.Sleep(ctx, wait) {
			return
		}
	}
}

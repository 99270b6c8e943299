package worker

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// PanicError is the error a handler's panic becomes: an ordinary error
// (retried like any other) carrying the panic value and the stack.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// attempt is one delivery going through the state machine.
type attempt struct {
	w       *Worker
	d       *Delivery
	job     *registered
	name    string // job name the delivery carried
	label   string // metrics label: a registered name or "unknown"
	key     string
	n       int    // this attempt's number, 1-based
	owner   string // claim token, when claimed
	claimed bool
	ctx     context.Context // Run's context: settlement detaches from it
}

// handle runs one delivery to a settlement. runCtx is Run's context;
// hctx is the handlers' context, cancelled at the drain deadline.
func (w *Worker) handle(runCtx, hctx context.Context, d *Delivery) {
	a := &attempt{w: w, d: d, ctx: runCtx}
	a.name = d.JobName
	if a.name == "" {
		a.name = d.Header(HeaderJobName)
	}
	a.key = d.Header(HeaderIdempotencyKey)
	a.n = max(d.Attempt, 1)
	if h, err := strconv.Atoi(d.Header(HeaderAttempts)); err == nil && h+1 > a.n {
		a.n = h + 1
	}
	a.job = w.lookup(a.name)
	a.label = "unknown"
	if a.job != nil {
		a.label = a.job.Name
	}
	if a.n > 1 {
		w.cfg.Metrics.redelivered(a.label)
	}

	if a.job == nil {
		reason := fmt.Sprintf("no job registered under the name %.200q", a.name)
		if a.n >= w.cfg.UnknownMaxDeliveries {
			a.deadLetter(string(quarantine.ClassUnknownName), reason, ErrUnknownJob)
		} else {
			a.retry("unknown_name", w.cfg.UnknownRetryDelay, true, ErrUnknownJob)
		}
		return
	}
	select {
	case a.job.sem <- struct{}{}:
		defer func() { <-a.job.sem }()
	case <-hctx.Done():
		a.retry("shutdown", 0, false, hctx.Err())
		return
	}
	if v := d.Header(HeaderSchemaVersion); !a.job.acceptsVersion(v) {
		a.deadLetter(string(quarantine.ClassPermanent),
			fmt.Sprintf("schema version %.40q is not accepted by job %s (current %q, previous %q)", v, a.job.Name, a.job.SchemaVersion, a.job.PreviousVersion), ErrPermanent)
		return
	}

	if w.cfg.Claims != nil && a.key != "" {
		if !a.claim() {
			return
		}
	}
	if a.job.MaxAttempts > 0 && a.n > a.job.MaxAttempts {
		// Earlier attempts ran but never settled (the process died, or
		// the settlement failed): the cap is spent, do not run again.
		a.deadLetter(string(quarantine.ClassExhausted),
			fmt.Sprintf("delivered %d times, above the cap of %d attempts: earlier attempts did not settle", a.n, a.job.MaxAttempts), nil)
		return
	}
	err := a.run(hctx)
	a.decide(hctx, err)
}

// claim takes the key; false when the delivery was settled instead.
func (a *attempt) claim() bool {
	w := a.w
	ctx, cancel := a.settleCtx()
	defer cancel()
	owner := w.newOwner()
	c, err := w.cfg.Claims.Claim(ctx, a.key, owner, w.cfg.ClaimLease)
	switch {
	case err != nil:
		w.log.Warn("claim failed", "job", a.label, "delivery", a.d.ID, "err", err)
		a.retry("claim_error", a.job.policy().Delay(1), false, err)
		return false
	case c.Status == AlreadyDone:
		a.settle(Outcome{Result: Duplicate}, func(ctx context.Context) error { return w.cfg.Driver.Ack(ctx, a.d) })
		return false
	case c.Status == HeldElsewhere:
		wait := max(c.LeaseUntil.Sub(w.cfg.Now()), time.Second)
		a.retry("claim_held", wait, false, nil)
		return false
	}
	a.owner, a.claimed = owner, true
	return true
}

// run calls the handler with its timeout, lease renewals and panic
// recovery.
func (a *attempt) run(hctx context.Context) (err error) {
	w := a.w
	ctx := hctx
	if a.job.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, a.job.Timeout)
		defer cancel()
	}
	stop := a.renew()
	defer stop()
	start := time.Now()
	defer func() {
		w.cfg.Metrics.ran(a.label, time.Since(start))
		if p := recover(); p != nil {
			err = &PanicError{Value: p, Stack: debug.Stack()}
		}
	}()
	return a.job.Handler(ctx, &a.job.Job, a.d)
}

// renew extends the claim every half lease and the driver's lease every
// Limits.RenewEvery until the returned stop is called.
func (a *attempt) renew() (stop func()) {
	w := a.w
	lim := w.cfg.Driver.Limits()
	claimed, key, owner := a.claimed, a.key, a.owner
	if !claimed && lim.RenewEvery <= 0 {
		return func() {}
	}
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		var claimTick, driverTick <-chan time.Time
		if claimed {
			t := time.NewTicker(w.cfg.ClaimLease / 2)
			defer t.Stop()
			claimTick = t.C
		}
		if lim.RenewEvery > 0 {
			t := time.NewTicker(lim.RenewEvery)
			defer t.Stop()
			driverTick = t.C
		}
		started := time.Now()
		for {
			select {
			case <-done:
				return
			case <-claimTick:
				ctx, cancel := a.settleCtx()
				if err := w.cfg.Claims.Extend(ctx, key, owner, w.cfg.ClaimLease); err != nil {
					w.log.Warn("claim renewal failed", "job", a.label, "delivery", a.d.ID, "err", err)
				}
				cancel()
			case <-driverTick:
				if lim.MaxRenew > 0 && time.Since(started)+lim.RenewEvery > lim.MaxRenew {
					driverTick = nil
					continue
				}
				ctx, cancel := a.settleCtx()
				if err := w.cfg.Driver.Extend(ctx, a.d); err != nil {
					w.log.Warn("lease renewal failed", "job", a.label, "delivery", a.d.ID, "err", err)
				}
				cancel()
			}
		}
	}()
	return func() { close(done); <-exited }
}

// decide settles the delivery after the handler returned err.
func (a *attempt) decide(hctx context.Context, err error) {
	w := a.w
	var ra *retryAfterError
	var rj *rejectError
	var pe *PanicError
	switch {
	case err == nil:
		if a.claimed {
			ctx, cancel := a.settleCtx()
			cerr := w.cfg.Claims.Complete(ctx, a.key, a.owner)
			cancel()
			if cerr != nil && !errors.Is(cerr, ErrClaimLost) {
				// The effect is done but not recorded: ack would be a
				// guess. Redeliver after the lease, when a takeover can
				// run it again (the one case that can repeat an effect).
				w.log.Error("recording the result failed; redelivering", "job", a.label, "delivery", a.d.ID, "err", cerr)
				a.claimed = false
				a.retry("record_error", w.cfg.ClaimLease, false, cerr)
				return
			}
			if cerr != nil {
				w.log.Warn("claim lost before completion (lease too short for the handler?)", "job", a.label, "delivery", a.d.ID)
			}
			a.claimed = false
		}
		a.settle(Outcome{Result: Completed, Ran: true}, func(ctx context.Context) error { return w.cfg.Driver.Ack(ctx, a.d) })
	case hctx.Err() != nil && errors.Is(err, hctx.Err()):
		a.retry("shutdown", 0, false, err)
	case errors.As(err, &rj):
		a.release()
		a.settle(Outcome{Result: Rejected, Err: err, Ran: true}, func(ctx context.Context) error { return w.cfg.Driver.Reject(ctx, a.d) })
	case errors.Is(err, ErrPermanent):
		class := quarantine.ClassPermanent
		if errors.Is(err, ErrMalformed) {
			class = quarantine.ClassMalformed
		}
		a.deadLetter(string(class), err.Error(), err)
	case a.job.MaxAttempts > 0 && a.n >= a.job.MaxAttempts:
		a.deadLetter(string(quarantine.ClassExhausted), fmt.Sprintf("attempt %d of %d failed: %s", a.n, a.job.MaxAttempts, err), err)
	case errors.As(err, &ra):
		a.retry("retry_after", ra.delay, true, err)
	case errors.As(err, &pe):
		w.log.Error("handler panicked", "job", a.label, "delivery", a.d.ID, "panic", fmt.Sprint(pe.Value), "stack", string(pe.Stack))
		a.retry("panic", a.job.policy().Delay(a.n), true, err)
	case errors.Is(err, context.DeadlineExceeded):
		a.retry("timeout", a.job.policy().Delay(a.n), true, err)
	default:
		a.retry("error", a.job.policy().Delay(a.n), true, err)
	}
}

func (a *attempt) settleCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(a.ctx), a.w.cfg.SettleTimeout)
}

// release frees the claim, if held, so that another delivery runs it.
func (a *attempt) release() {
	if !a.claimed {
		return
	}
	a.claimed = false
	ctx, cancel := a.settleCtx()
	defer cancel()
	if err := a.w.cfg.Claims.Release(ctx, a.key, a.owner); err != nil {
		a.w.log.Warn("releasing the claim failed; it frees itself when its lease expires", "job", a.label, "delivery", a.d.ID, "err", err)
	}
}

// retry releases the claim and settles the delivery for a later one.
// counted says whether this attempt counts against the cap.
func (a *attempt) retry(class string, delay time.Duration, counted bool, err error) {
	w := a.w
	a.release()
	delay = roundDelay(delay, w.cfg.Driver.Limits())
	if a.d.Headers == nil {
		a.d.Headers = map[string]string{}
	}
	done := a.n
	if !counted {
		done = a.n - 1
	}
	a.d.Headers[HeaderAttempts] = strconv.Itoa(done)
	if counted && a.d.Header(HeaderFirstFailedAt) == "" {
		a.d.Headers[HeaderFirstFailedAt] = w.cfg.Now().UTC().Format(time.RFC3339Nano)
	}
	if err != nil && class != "shutdown" {
		w.log.Info("retrying", "job", a.label, "delivery", a.d.ID, "attempt", a.n, "class", class, "delay", delay, "err", compact(err.Error(), 512))
	}
	a.settle(Outcome{Result: Retried, Class: class, Delay: delay, Err: err, Ran: counted && class != "unknown_name"},
		func(ctx context.Context) error { return w.cfg.Driver.Retry(ctx, a.d, delay) })
}

// deadLetter publishes the failure envelope, then releases the claim so
// that a replay of the key runs.
func (a *attempt) deadLetter(class, reason string, err error) {
	w := a.w
	env, merr := a.envelope(class, reason)
	if merr != nil {
		w.log.Error("building the failure envelope failed", "job", a.label, "delivery", a.d.ID, "err", merr)
		a.release()
		return
	}
	w.log.Warn("dead-lettering", "job", a.label, "delivery", a.d.ID, "attempt", a.n, "class", class, "reason", compact(reason, 512))
	a.settle(Outcome{Result: DeadLettered, Class: class, Err: err, Ran: a.job != nil},
		func(ctx context.Context) error { return w.cfg.Driver.DeadLetter(ctx, a.d, env) })
	a.release()
}

// settle runs the driver settlement on a fresh context detached from
// Run's cancellation, then reports the outcome when the backend accepted.
func (a *attempt) settle(o Outcome, f func(ctx context.Context) error) {
	w := a.w
	if w.abandoned.Load() {
		return
	}
	ctx, cancel := a.settleCtx()
	defer cancel()
	if err := f(ctx); err != nil {
		w.log.Error("settlement failed; the backend will redeliver", "job", a.label, "delivery", a.d.ID, "result", o.Result.String(), "err", err)
		return
	}
	o.Job, o.Key, o.DeliveryID, o.Attempt, o.jobLabel = a.name, a.key, a.d.ID, a.n, a.label
	w.cfg.Metrics.observe(o)
	if w.cfg.OnOutcome != nil {
		w.cfg.OnOutcome(o)
	}
}

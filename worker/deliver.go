package worker

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"
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
	ran     bool            // the handler was called
	ctx     context.Context // Run's context: settlement detaches from it
	// settled is the outcome the backend accepted, when it did.
	settled *Outcome
}

// attemptNumber is d's attempt (see Delivery.Attempt): the attempts the
// worker recorded on its last retry, plus one, plus the deliveries the
// backend counted since that retry without the worker settling them.
func attemptNumber(d *Delivery, lim Limits) int {
	h, err := strconv.Atoi(d.Header(HeaderAttempts))
	if err != nil || h < 0 {
		return max(d.Attempt, 1)
	}
	if !lim.RetryKeepsCount {
		return h + max(d.Attempt, 1) // the retry is a new message, counted from 1
	}
	r, err := strconv.Atoi(d.Header(HeaderDelivered))
	switch {
	case err != nil || r <= 0:
		return max(d.Attempt, h+1) // written without HeaderDelivered
	case d.Attempt > r:
		return h + d.Attempt - r
	default:
		return h + 1
	}
}

// handle runs one delivery to a settlement and returns the outcome the
// backend accepted (nil when none was: the settlement failed, or the
// delivery was left to be redelivered). runCtx is Run's context; hctx is
// the handlers' context, cancelled at the drain deadline. Run and
// ConsumeOne both go through it.
func (w *Worker) handle(runCtx, hctx context.Context, d *Delivery) *Outcome {
	a := &attempt{w: w, d: d, ctx: runCtx}
	w.step(a, hctx)
	return a.settled
}

// step is the state machine for one delivery: validate, wait for a slot,
// claim the key, run the handler, record, settle.
func (w *Worker) step(a *attempt, hctx context.Context) {
	d := a.d
	a.name = d.JobName
	if a.name == "" {
		a.name = d.Header(HeaderJobName)
	}
	a.key = d.Header(HeaderIdempotencyKey)
	a.n = attemptNumber(d, w.cfg.Driver.Limits())
	a.job = w.lookup(a.name)
	a.label = "unknown"
	if a.job != nil {
		a.label = a.job.Name
	}
	w.inflight.Store(d, a.label)
	defer w.inflight.Delete(d)
	w.cfg.Metrics.received(a.label, w.cfg.Now(), d)
	if a.n > 1 {
		w.cfg.Metrics.redelivered(a.label)
	}

	if nb, err := time.Parse(time.RFC3339Nano, d.Header(HeaderNotBefore)); err == nil {
		if left := nb.Sub(w.cfg.Now()); left > 0 {
			// A delay longer than the driver takes: wait on, neither
			// running nor counting.
			a.retry("deferred", left, false, nil)
			return
		}
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

// backoff is the job's delay after attempt n failed. A policy that
// panics is logged and replaced by the default backoff.
func (a *attempt) backoff(n int) time.Duration {
	d, err := safeDelay(a.job.policy(), n)
	if err != nil {
		a.w.log.Error("backoff failed; using the default backoff", "job", a.label, "delivery", a.d.ID, "err", err)
		d = defaultBackoff.Delay(n)
	}
	return d
}

// claim takes the key; false when the delivery was settled instead.
func (a *attempt) claim() bool {
	w := a.w
	ctx, cancel := a.settleCtx()
	defer cancel()
	owner := w.newOwner()
	c, err := w.cfg.Claims.Claim(ctx, a.key, owner, w.cfg.ClaimLease)
	if err != nil {
		w.log.Warn("claim failed", "job", a.label, "delivery", a.d.ID, "err", err)
		// The store is down for every delivery at once: back off by the
		// worker's run of failed claims, not by this delivery's, within
		// the attempts Register checked the backoff for (10 without a cap).
		limit := int64(10)
		if a.job.MaxAttempts > 0 {
			limit = int64(max(a.job.MaxAttempts-1, 1))
		}
		a.retry("claim_error", a.backoff(int(min(w.claimErrors.Add(1), limit))), false, err)
		return false
	}
	w.claimErrors.Store(0)
	switch {
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
	a.ran = true
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
			a.claimed = false
			switch {
			case errors.Is(cerr, ErrClaimLost):
				a.recordLost()
				return
			case cerr != nil:
				// The effect is done but not recorded: ack would be a
				// guess. Redeliver after the lease, when a takeover can
				// run it again (the one case that can repeat an effect).
				w.log.Error("recording the result failed; redelivering", "job", a.label, "delivery", a.d.ID, "err", cerr)
				a.retry("record_error", w.cfg.ClaimLease, false, cerr)
				return
			}
		}
		a.settle(Outcome{Result: Completed}, func(ctx context.Context) error { return w.cfg.Driver.Ack(ctx, a.d) })
	case hctx.Err() != nil && errors.Is(err, hctx.Err()):
		a.retry("shutdown", 0, false, err)
	case errors.As(err, &rj):
		a.release()
		a.settle(Outcome{Result: Rejected, Err: err}, func(ctx context.Context) error { return w.cfg.Driver.Reject(ctx, a.d) })
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
		a.retry("panic", a.backoff(a.n), true, err)
	case errors.Is(err, context.DeadlineExceeded):
		a.retry("timeout", a.backoff(a.n), true, err)
	default:
		a.retry("error", a.backoff(a.n), true, err)
	}
}

// recordLost settles a delivery whose handler succeeded after its claim
// was lost (the lease expired and another delivery of the key took it
// over). Acking would be a guess: the other delivery may have failed and
// released the key, leaving no terminal record. So the key is claimed
// again: free, it is completed (this run's effect is the record) and
// acked; done elsewhere, acked as a duplicate; held by a live lease, or
// the claims unreachable, the delivery is retried (not counted) after
// the lease, when the key's state decides.
func (a *attempt) recordLost() {
	w := a.w
	w.log.Warn("claim lost before completion (lease too short for the handler?): claiming the key again", "job", a.label, "delivery", a.d.ID)
	ctx, cancel := a.settleCtx()
	owner := w.newOwner()
	c, err := w.cfg.Claims.Claim(ctx, a.key, owner, w.cfg.ClaimLease)
	if err == nil && c.Status == Claimed {
		a.owner, a.claimed = owner, true
		err = w.cfg.Claims.Complete(ctx, a.key, owner)
		a.claimed = err != nil
	}
	cancel()
	switch {
	case err != nil:
		a.retry("record_error", w.cfg.ClaimLease, false, fmt.Errorf("%w; claiming it again: %w", ErrClaimLost, err))
	case c.Status == Claimed:
		a.settle(Outcome{Result: Completed}, func(ctx context.Context) error { return w.cfg.Driver.Ack(ctx, a.d) })
	case c.Status == AlreadyDone:
		a.settle(Outcome{Result: Duplicate}, func(ctx context.Context) error { return w.cfg.Driver.Ack(ctx, a.d) })
	default:
		a.retry("claim_lost", max(c.LeaseUntil.Sub(w.cfg.Now()), time.Second), false, ErrClaimLost)
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
	lim := w.cfg.Driver.Limits()
	asked := max(delay, 0)
	delay = roundDelay(asked, lim)
	if a.d.Headers == nil {
		a.d.Headers = map[string]string{}
	}
	done := a.n
	if !counted {
		done = a.n - 1
	}
	setHeader(a.d.Headers, HeaderAttempts, strconv.Itoa(done))
	if lim.RetryKeepsCount {
		setHeader(a.d.Headers, HeaderDelivered, strconv.Itoa(max(a.d.Attempt, 0)))
	}
	if delay < asked {
		// The driver cannot wait that long: the delivery comes back
		// after delay and is deferred until then.
		setHeader(a.d.Headers, HeaderNotBefore, w.cfg.Now().Add(asked).UTC().Format(time.RFC3339Nano))
	} else {
		setHeader(a.d.Headers, HeaderNotBefore, "")
	}
	if counted && a.d.Header(HeaderFirstFailedAt) == "" {
		setHeader(a.d.Headers, HeaderFirstFailedAt, w.cfg.Now().UTC().Format(time.RFC3339Nano))
	}
	if err != nil && class != "shutdown" {
		w.log.Info("retrying", "job", a.label, "delivery", a.d.ID, "attempt", a.n, "class", class, "delay", delay, "err", compact(err.Error(), 512))
	}
	a.settle(Outcome{Result: Retried, Class: class, Delay: delay, Err: err},
		func(ctx context.Context) error { return w.cfg.Driver.Retry(ctx, a.d, delay) })
}

// setHeader sets name in h, replacing a spelling of it in another case;
// an empty value removes it.
func setHeader(h map[string]string, name, value string) {
	for k := range h {
		if k != name && strings.EqualFold(k, name) {
			delete(h, k)
		}
	}
	if value == "" {
		delete(h, name)
		return
	}
	h[name] = value
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
	a.settle(Outcome{Result: DeadLettered, Class: class, Err: err},
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
		w.cfg.Metrics.settleFailed(a.label, o.Result)
		return
	}
	o.Job, o.Key, o.DeliveryID, o.Attempt, o.Ran, o.jobLabel = a.name, a.key, a.d.ID, a.n, a.ran, a.label
	a.settled = &o
	w.cfg.Metrics.observe(o)
	if w.cfg.OnOutcome != nil {
		w.cfg.OnOutcome(o)
	}
}

package worker_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/broker/memory"
	"github.com/quarantine-dev/quarantine/collect"
	"github.com/quarantine-dev/quarantine/worker"
	"github.com/quarantine-dev/quarantine/worker/claimtest"
)

// tb is what env needs of a test: *testing.T and *rapid.T both have it.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
	Cleanup(func())
}

// env is one worker on a memory work queue with memory claims and an
// injected clock, recording outcomes and business effects.
type env struct {
	t        tb
	clk      *claimtest.Clock
	q        *memory.WorkQueue
	drv      *countingDriver
	claims   *faultyClaims
	outcomes chan worker.Outcome
	cfg      worker.Config
	wrap     func(worker.Driver) worker.Driver

	mu      sync.Mutex
	effects map[string]int // business effects per idempotency key
	runs    map[string]int // handler runs per message id
}

type envOption func(*env)

func withConfig(f func(*worker.Config)) envOption { return func(e *env) { f(&e.cfg) } }

// withDriver wraps the counting driver (to change limits or count
// renewals).
func withDriver(f func(worker.Driver) worker.Driver) envOption {
	return func(e *env) { e.wrap = f }
}

// withQueue sets the work queue's options (the clock is always the env's).
func withQueue(o memory.WorkQueueOptions) envOption {
	return func(e *env) {
		o.Now = e.clk.Now
		e.q = memory.NewWorkQueue("work", o)
		e.drv = &countingDriver{Driver: e.q}
	}
}

// withClaims runs the worker on c instead of the env's memory claims.
func withClaims(c worker.Claims) envOption {
	return func(e *env) { e.claims = &faultyClaims{Claims: c}; e.cfg.Claims = e.claims }
}

// withoutClaims runs the worker without claims.
func withoutClaims() envOption { return func(e *env) { e.cfg.Claims = nil } }

func newEnv(t tb, opts ...envOption) *env {
	t.Helper()
	clk := claimtest.NewClock(claimtest.Start)
	q := memory.NewWorkQueue("work", memory.WorkQueueOptions{Now: clk.Now})
	e := &env{
		t: t, clk: clk, q: q, drv: &countingDriver{Driver: q},

		outcomes: make(chan worker.Outcome, 10000),
		effects:  map[string]int{}, runs: map[string]int{},
	}
	e.cfg = worker.Config{
		Now:    clk.Now,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnOutcome: func(o worker.Outcome) {
			select {
			case e.outcomes <- o:
			default:
				t.Errorf("outcome channel full")
			}
		},
		DrainTimeout:  50 * time.Millisecond,
		SettleTimeout: time.Second,
	}
	mem := worker.NewMemoryClaims(clk.Now)
	e.claims = &faultyClaims{Claims: mem, mem: mem}
	e.cfg.Claims = e.claims
	for _, o := range opts {
		o(e)
	}
	e.cfg.Driver = e.drv
	if e.wrap != nil {
		e.cfg.Driver = e.wrap(e.drv)
	}
	return e
}

// start registers jobs and runs a worker until the test ends; it returns
// a function that stops it and returns Run's error.
func (e *env) start(jobs ...worker.Job) (stop func() error) {
	e.t.Helper()
	w, err := worker.New(e.cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, j := range jobs {
		if err := w.Register(j); err != nil {
			e.t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop = func() error {
		once.Do(func() { cancel(); runErr = <-done })
		return runErr
	}
	e.t.Cleanup(func() { _ = stop() })
	return stop
}

// put enqueues a job message with key.
func (e *env) put(id, job, key string, body string) {
	h := map[string]string{}
	if key != "" {
		h[worker.HeaderIdempotencyKey] = key
	}
	if job != "" {
		h[worker.HeaderJobName] = job
	}
	e.q.Put(memory.Job{ID: id, Headers: h, Body: []byte(body), ContentType: "application/json"})
}

// effect records one business effect for key (the handler's side
// effect) and one run of message id.
func (e *env) effect(key string) {
	e.mu.Lock()
	e.effects[key]++
	e.mu.Unlock()
}

func (e *env) ran(id string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.runs[id]++
	return e.runs[id]
}

func (e *env) effectsOf(key string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.effects[key]
}

func (e *env) runsOf(id string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.runs[id]
}

// next waits for the next outcome.
func (e *env) next() worker.Outcome {
	e.t.Helper()
	select {
	case o := <-e.outcomes:
		return o
	case <-time.After(5 * time.Second):
		e.t.Fatal("no outcome within 5s")
		return worker.Outcome{}
	}
}

// expect waits for the next outcome and checks its result (and class
// when class is not empty).
func (e *env) expect(r worker.Result, class string) worker.Outcome {
	e.t.Helper()
	o := e.next()
	if o.Result != r || (class != "" && o.Class != class) {
		e.t.Fatalf("outcome = %v class %q (attempt %d, err %v), want %v %q", o.Result, o.Class, o.Attempt, o.Err, r, class)
	}
	return o
}

// quiet asserts that no outcome arrives for d (real time).
func (e *env) quiet(d time.Duration) {
	e.t.Helper()
	select {
	case o := <-e.outcomes:
		e.t.Fatalf("unexpected outcome %v class %q for %s", o.Result, o.Class, o.DeliveryID)
	case <-time.After(d):
	}
}

// idle waits until nothing is in flight, no settlement is running and no
// waiting job is due, so that only a clock move can make progress.
func (e *env) idle() {
	e.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for stable := 0; stable < 3; {
		if time.Now().After(deadline) {
			w, f := e.q.Len()
			e.t.Fatalf("not idle after 5s: %d waiting, %d in flight, %d deliveries unsettled", w, f, e.drv.open.Load())
		}
		if e.drv.open.Load() == 0 && !e.due() {
			stable++
		} else {
			stable = 0
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (e *env) due() bool {
	now := e.clk.Now()
	for _, j := range e.q.Waiting() {
		if !j.ReadyAt.After(now) {
			return true
		}
	}
	return false
}

// decode reads a failure envelope the way the collectors do.
func decode(t tb, raw []byte) *quarantine.Message {
	t.Helper()
	m, problems := collect.DecodeEnvelope(raw, collect.Origin{Source: "test", Kind: quarantine.SourceMemory})
	if len(problems) > 0 {
		t.Fatalf("envelope problems: %+v\n%s", problems, raw)
	}
	return m
}

// countingDriver counts deliveries received and not yet settled (every
// delivery gets exactly one settlement call), and can fail settlements.
type countingDriver struct {
	worker.Driver
	open    atomic.Int64
	failAck atomic.Bool

	mu       sync.Mutex
	received map[string]int // deliveries per message id
	settled  map[string]int // settlements the backend accepted per message id
}

func (d *countingDriver) Receive(ctx context.Context, n int) ([]*worker.Delivery, error) {
	ds, err := d.Driver.Receive(ctx, n)
	d.open.Add(int64(len(ds)))
	d.mu.Lock()
	if d.received == nil {
		d.received, d.settled = map[string]int{}, map[string]int{}
	}
	for _, dl := range ds {
		d.received[dl.ID]++
	}
	d.mu.Unlock()
	return ds, err
}

// done counts a settlement of dl the backend accepted.
func (d *countingDriver) done(dl *worker.Delivery, err error) error {
	d.open.Add(-1)
	if err == nil {
		d.mu.Lock()
		d.settled[dl.ID]++
		d.mu.Unlock()
	}
	return err
}

// unsettled is how many deliveries of message id never settled (their
// consumer crashed, or the settlement failed).
func (d *countingDriver) unsettled(id string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.received[id] - d.settled[id]
}

func (d *countingDriver) Ack(ctx context.Context, dl *worker.Delivery) error {
	if d.failAck.Load() {
		return d.done(dl, errors.New("ack refused by the test"))
	}
	return d.done(dl, d.Driver.Ack(ctx, dl))
}

func (d *countingDriver) Retry(ctx context.Context, dl *worker.Delivery, delay time.Duration) error {
	return d.done(dl, d.Driver.Retry(ctx, dl, delay))
}

func (d *countingDriver) DeadLetter(ctx context.Context, dl *worker.Delivery, env []byte) error {
	return d.done(dl, d.Driver.DeadLetter(ctx, dl, env))
}

func (d *countingDriver) Reject(ctx context.Context, dl *worker.Delivery) error {
	return d.done(dl, d.Driver.Reject(ctx, dl))
}

// faultyClaims injects kills: after a successful Claim or Complete the
// hook runs (a test crashes the queue there: the process died at that
// point), and the call then fails (kill after claim) or succeeds.
type faultyClaims struct {
	worker.Claims
	mem           *worker.MemoryClaims // when Claims is one
	mu            sync.Mutex
	afterClaim    func(key string) (kill bool)
	afterComplete func(key string)
	extends       atomic.Int64
	down          atomic.Bool  // Claim fails (the claim store is unreachable)
	failComplete  atomic.Int32 // the next n Completes fail
	failedRecords map[string]int
}

// recordFailures is how many Completes of key failComplete refused.
func (c *faultyClaims) recordFailures(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.failedRecords[key]
}

var errClaimsDown = errors.New("claim store unreachable (test)")

func (c *faultyClaims) Extend(ctx context.Context, key, owner string, lease time.Duration) error {
	c.extends.Add(1)
	return c.Claims.Extend(ctx, key, owner, lease)
}

var errKilled = errors.New("killed by the test")

func (c *faultyClaims) Claim(ctx context.Context, key, owner string, lease time.Duration) (worker.Claim, error) {
	if c.down.Load() {
		return worker.Claim{}, errClaimsDown
	}
	cl, err := c.Claims.Claim(ctx, key, owner, lease)
	c.mu.Lock()
	hook := c.afterClaim
	c.mu.Unlock()
	if err == nil && cl.Status == worker.Claimed && hook != nil && hook(key) {
		return worker.Claim{}, errKilled
	}
	return cl, err
}

func (c *faultyClaims) Complete(ctx context.Context, key, owner string) error {
	if c.failComplete.Add(-1) >= 0 {
		c.mu.Lock()
		if c.failedRecords == nil {
			c.failedRecords = map[string]int{}
		}
		c.failedRecords[key]++
		c.mu.Unlock()
		return errClaimsDown
	}
	c.failComplete.Store(0)
	err := c.Claims.Complete(ctx, key, owner)
	c.mu.Lock()
	hook := c.afterComplete
	c.mu.Unlock()
	if err == nil && hook != nil {
		hook(key)
	}
	return err
}

func (c *faultyClaims) set(afterClaim func(string) bool, afterComplete func(string)) {
	c.mu.Lock()
	c.afterClaim, c.afterComplete = afterClaim, afterComplete
	c.mu.Unlock()
}

// Done reports whether key completed (memory claims only).
func (c *faultyClaims) Done(key string) bool { return c.mem.Done(key) }

// Violations runs the proof query of the claims underneath.
func (c *faultyClaims) Violations(ctx context.Context) ([]string, error) {
	return c.Claims.(worker.Prover).Violations(ctx)
}

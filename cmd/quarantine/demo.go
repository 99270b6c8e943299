package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/broker/memory"
	"github.com/quarantine-dev/quarantine/collect"
	"github.com/quarantine-dev/quarantine/replay"
	"github.com/quarantine-dev/quarantine/worker"
	"github.com/quarantine-dev/quarantine/worker/sqliteclaims"
)

// The demo's names.
const (
	demoQueue      = "reports"        // the work queue of build-report jobs
	demoFailures   = "reports.failed" // its failure queue
	demoCollector  = "demo"           // the collector draining it
	demoJob        = "build-report"
	demoDatabase   = "sqlite:./quarantine-data/demo.db"
	demoClaimsFile = "demo-claims.db" // beside the demo's database
)

// demoOptions are the flags of `quarantine demo`.
type demoOptions struct {
	tour bool
}

// demo is the whole loop in one process: an in-memory broker, a worker
// built on package worker with durable claims, a producer, and the
// service collecting the worker's failures and replaying them back.
type demo struct {
	broker *memory.Broker
	queue  *memory.WorkQueue
	claims *sqliteclaims.Claims
	job    worker.Job
	worker *worker.Worker
	cancel context.CancelFunc
	done   chan struct{}
	tmpDir string // the tour's database folder, removed at the end

	mu       sync.Mutex
	effects  map[string]int // business effects per idempotency key
	flaky    map[string]int // attempts of the flaky jobs
	outcomes []worker.Outcome
	notify   chan struct{} // closed and replaced at every outcome
}

// report is the payload of a build-report job.
type report struct {
	Report string `json:"report"`
	Format string `json:"format"`
	Flaky  bool   `json:"flaky,omitempty"`
}

// demoJobs are what the producer sends: good jobs, two poison ones (a
// format that does not exist) and a flaky one (its renderer answers 429
// once).
var demoJobs = []report{
	{"r-1", "pdf", false}, {"r-2", "csv", false}, {"r-3", "pdf", false}, {"r-4", "html", false},
	{"r-5", "pdff", false}, {"r-6", "csv", false}, {"r-7", "pdf", true}, {"r-8", "xlsx!", false},
}

// runDemo prepares the in-memory broker and its collector, serves, then
// starts the worker and the producer. With --tour it walks the loop by
// itself, prints each step and returns.
func (m *Main) runDemo(ctx context.Context) error {
	d := &demo{effects: map[string]int{}, flaky: map[string]int{}, notify: make(chan struct{})}
	m.demoRun = d
	if m.demo.tour && m.Config.Database.Reveal() == demoDatabase {
		dir, err := os.MkdirTemp("", "quarantine-tour-")
		if err != nil {
			return err
		}
		d.tmpDir = dir
		m.Config.Database = DatabaseURL("sqlite:" + filepath.Join(dir, "quarantine.db"))
		m.Config.Listen = "127.0.0.1:0"
	}
	if !strings.HasPrefix(m.Config.Database.Reveal(), "sqlite:") {
		return quarantine.FieldErrorf(quarantine.EINVALID, "database", "the demo runs on the embedded SQLite store (sqlite:PATH)")
	}
	d.broker = memory.New(demoQueue)
	m.Config.Collectors = append(m.Config.Collectors, CollectorConfig{
		Name: demoCollector, Kind: "memory", BatchSize: 100, Linger: 20 * time.Millisecond, Commits: 1,
		open: func(collectorDeps) (collect.Source, error) {
			return memory.NewSource(d.broker, demoFailures, demoCollector), nil
		},
		publisher: func(collectorDeps) (replay.Publisher, error) { return d.broker, nil },
	})
	m.Config.Replay.Poll = 100 * time.Millisecond
	if err := m.runServe(ctx); err != nil {
		return err
	}
	if err := d.startWorker(m); err != nil {
		return err
	}
	if !m.demo.tour {
		if err := d.produce(ctx); err != nil {
			return err
		}
		secret, err := m.demoLogin(ctx)
		if err != nil {
			return err
		}
		m.printDemoGuide(secret)
		return nil
	}
	err := m.tour(ctx, d)
	m.served = nil // the tour is over: Execute does not wait for a signal
	return err
}

// startWorker runs a worker on the work queue, with claims in a SQLite
// file beside the database, until the demo stops.
func (d *demo) startWorker(m *Main) error {
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	d.queue = memory.NewWorkQueue(demoQueue, memory.WorkQueueOptions{Broker: d.broker, FailureQueue: demoFailures})
	d.queue.FeedFrom(ctx, d.broker, demoQueue) // replays land on the work queue
	dbPath := strings.TrimPrefix(m.Config.Database.Reveal(), "sqlite:")
	claims, err := sqliteclaims.Open(context.Background(), filepath.Join(filepath.Dir(dbPath), demoClaimsFile), nil)
	if err != nil {
		return fmt.Errorf("demo claims: %w", err)
	}
	d.claims = claims
	w, err := worker.New(worker.Config{
		Driver: d.queue, Claims: claims, Logger: m.logger,
		OnOutcome: d.record,
	})
	if err != nil {
		return err
	}
	d.job = worker.Job{
		Name: demoJob, Queue: demoQueue, SchemaVersion: "1", MaxAttempts: 3,
		Backoff: worker.Backoff(100*time.Millisecond, 2, time.Second),
		Handler: worker.JSON(d.build),
	}
	if err := w.Register(d.job); err != nil {
		return err
	}
	d.worker = w
	d.done = make(chan struct{})
	go func() {
		defer close(d.done)
		_ = w.Run(ctx)
	}()
	return nil
}

// build is the job's handler: the business effect is counted per key.
func (d *demo) build(_ context.Context, dl *worker.Delivery, r report) error {
	switch r.Format {
	case "pdf", "csv", "html":
	default:
		return worker.Permanent(fmt.Errorf("unknown report format %q", r.Format))
	}
	key := dl.Header(worker.HeaderIdempotencyKey)
	d.mu.Lock()
	defer d.mu.Unlock()
	if r.Flaky && d.flaky[key] == 0 {
		d.flaky[key]++
		return worker.RetryAfter(errors.New("the renderer answered 429 Too Many Requests"), time.Second)
	}
	d.effects[key]++
	return nil
}

// produce dispatches the demo's jobs, keyed by report id.
func (d *demo) produce(ctx context.Context) error {
	for _, r := range demoJobs {
		if err := worker.Dispatch(ctx, d.queue, &d.job, "report:"+r.Report, r, nil); err != nil {
			return err
		}
	}
	return nil
}

// record keeps an outcome the worker reported (after its settlement).
func (d *demo) record(o worker.Outcome) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.outcomes = append(d.outcomes, o)
	close(d.notify)
	d.notify = make(chan struct{})
}

// waitOutcomes waits until ok holds for the outcomes so far (at most
// within), and returns them.
func (d *demo) waitOutcomes(ctx context.Context, within time.Duration, ok func([]worker.Outcome) bool) ([]worker.Outcome, error) {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for {
		d.mu.Lock()
		got, ch := append([]worker.Outcome(nil), d.outcomes...), d.notify
		d.mu.Unlock()
		if ok(got) {
			return got, nil
		}
		select {
		case <-ctx.Done():
			return got, ctx.Err()
		case <-ch:
		}
	}
}

// effectsOf returns the business effects per key.
func (d *demo) effectsOf() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]int, len(d.effects))
	for k, v := range d.effects {
		out[k] = v
	}
	return out
}

// stop ends the worker and closes the claims.
func (d *demo) stop() error {
	if d == nil {
		return nil
	}
	if d.cancel != nil {
		d.cancel()
	}
	if d.done != nil {
		<-d.done
	}
	var err error
	if d.claims != nil {
		err = d.claims.Close()
	}
	if d.tmpDir != "" {
		err = errors.Join(err, os.RemoveAll(d.tmpDir))
	}
	return err
}

// demoLoginName names the admin token each demo run logs in with.
const demoLoginName = "demo-login"

// demoLogin creates a fresh admin token for this run of the demo (the
// previous run's is revoked: its secret was only printed) and returns its
// secret. Every run can so print a login URL that works, the first as
// well as the next ones.
func (m *Main) demoLogin(ctx context.Context) (Secret, error) {
	toks, err := m.store.ListTokens(ctx)
	if err != nil {
		return "", err
	}
	for _, t := range toks {
		if t.Name == demoLoginName && t.RevokedAt == nil {
			if err := m.store.RevokeToken(ctx, t.ID, systemActor); err != nil && quarantine.ErrorCode(err) != quarantine.ENOTFOUND {
				return "", err
			}
		}
	}
	secret, hash := quarantine.NewTokenSecret()
	t := &quarantine.Token{Name: demoLoginName, Role: quarantine.RoleAdmin, Owners: []string{}, CreatedBy: systemActor, SecretHash: hash}
	if err := m.store.CreateToken(ctx, t, systemActor); err != nil {
		return "", err
	}
	return Secret(secret), nil
}

// printDemoGuide tells what the demo did, the one login URL that works
// (secret's), and what to try.
func (m *Main) printDemoGuide(secret Secret) {
	base := m.URL()
	fmt.Fprintf(m.Stderr, `
    The demo is running: %d build-report jobs went to the in-memory queue
    %q. The worker completes the good ones, retries the flaky one after
    its 429, and dead-letters the two with an unknown format; the
    collector %q stores those in the quarantine.

    To open quarantine, visit this URL (a fresh admin login at every
    start of the demo; the previous one no longer works):

        %s/?token=%s

    or call the API with the same token:

        curl -H 'Authorization: Bearer %s' '%s/api/v1/messages?queue=%s'

    Fix one (PUT /api/v1/messages/{id}/payload with If-Match and a reason),
    then replay it (POST /api/v1/replays). Or let 'quarantine demo --tour'
    do it all and explain each step. Ctrl-C stops the demo.

`, len(demoJobs), demoQueue, demoCollector, base, url.QueryEscape(secret.Reveal()), secret.Reveal(), base, demoQueue)
}

// effectsTable renders the effects per key, sorted.
func effectsTable(effects map[string]int, keys []string) string {
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "        %-14s %d\n", k, effects[k])
	}
	return b.String()
}

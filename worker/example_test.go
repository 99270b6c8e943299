package worker_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/quarantine-dev/quarantine/broker/memory"
	"github.com/quarantine-dev/quarantine/worker"
	"github.com/quarantine-dev/quarantine/worker/sqliteclaims"
)

// A worker on the in-memory work queue with in-memory claims: a job is
// dispatched twice under one business key (a producer retry, or a
// replay), and runs once.
func Example() {
	queue := memory.NewWorkQueue("reports", memory.WorkQueueOptions{})
	done := make(chan worker.Outcome, 2)
	w, err := worker.New(worker.Config{
		Driver:    queue,
		Claims:    worker.NewMemoryClaims(nil),
		OnOutcome: func(o worker.Outcome) { done <- o },
	})
	if err != nil {
		panic(err)
	}
	type report struct {
		Month string `json:"month"`
	}
	job := worker.Job{
		Name: "build-report", Queue: "reports", SchemaVersion: "1", MaxAttempts: 5,
		Backoff: worker.Backoff(time.Second, 2, time.Minute),
		Handler: worker.JSON(func(ctx context.Context, d *worker.Delivery, r report) error {
			fmt.Println("building the report for", r.Month)
			return nil
		}),
	}
	if err := w.Register(job); err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.Run(ctx)

	for range 2 {
		if err := worker.Dispatch(ctx, queue, &job, "report:2026-03", report{Month: "2026-03"}, nil); err != nil {
			panic(err)
		}
		o := <-done
		fmt.Println(o.Result, o.Key)
	}
	// Output:
	// building the report for 2026-03
	// completed report:2026-03
	// duplicate report:2026-03
}

// A handler calling an HTTP API turns its 429 or 503 answer into a retry
// after the delay the server asked for.
func ExampleRetryAfterResponse() {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	resp := &http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"30"}}}
	fmt.Println(worker.RetryAfterResponse(resp, now, 5*time.Second, nil))
	resp = &http.Response{StatusCode: http.StatusServiceUnavailable, Header: http.Header{"Retry-After": {"Sun, 01 Mar 2026 12:02:00 GMT"}}}
	fmt.Println(worker.RetryAfterResponse(resp, now, 5*time.Second, nil))
	resp = &http.Response{StatusCode: http.StatusOK}
	fmt.Println(worker.RetryAfterResponse(resp, now, 5*time.Second, nil))
	// Output:
	// HTTP 429 Too Many Requests (retry after 30s)
	// HTTP 503 Service Unavailable (retry after 2m0s)
	// <nil>
}

// Backoff with full jitter: after the third failed attempt the delay is
// uniform in [0, min(max, initial·multiplier²)].
func ExampleBackoff() {
	b := worker.Backoff(time.Second, 2, 10*time.Second)
	d := b.Delay(3)
	fmt.Println(d >= 0 && d <= 4*time.Second)
	d = b.Delay(10)
	fmt.Println(d >= 0 && d <= 10*time.Second)
	// Output:
	// true
	// true
}

// The message Dispatch sends: the payload as body, the key, job name and
// schema version as headers (the shape the replay engine publishes).
func ExampleNewMessage() {
	job := &worker.Job{Name: "build-report", Queue: "reports", SchemaVersion: "2"}
	now := func() time.Time { return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) }
	m, err := worker.NewMessage(job, "report:2026-03", map[string]string{"month": "2026-03"}, &worker.DispatchOptions{Now: now})
	if err != nil {
		panic(err)
	}
	fmt.Println(m.Queue, m.ContentType, string(m.Body))
	names := make([]string, 0, len(m.Headers))
	for k := range m.Headers {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Printf("%s: %s\n", k, m.Headers[k])
	}
	_, err = worker.NewMessage(job, "", nil, nil)
	fmt.Println(err)
	// Output:
	// reports application/json {"month":"2026-03"}
	// x-idempotency-key: report:2026-03
	// x-quarantine-enqueued-at: 2026-03-01T12:00:00Z
	// x-quarantine-job-name: build-report
	// x-schema-version: 2
	// invalid: dispatch build-report: a business idempotency key is required
}

// Claims: a completed key answers "already done"; a released one (its
// job was dead-lettered) runs again when replayed.
func ExampleMemoryClaims() {
	ctx := context.Background()
	claims := worker.NewMemoryClaims(nil)
	c, _ := claims.Claim(ctx, "order-1", "worker-a", time.Minute)
	fmt.Println(c.Status)
	c, _ = claims.Claim(ctx, "order-1", "worker-b", time.Minute)
	fmt.Println(c.Status, c.Owner)
	_ = claims.Complete(ctx, "order-1", "worker-a")
	c, _ = claims.Claim(ctx, "order-1", "worker-b", time.Minute)
	fmt.Println(c.Status)

	_, _ = claims.Claim(ctx, "order-2", "worker-a", time.Minute)
	_ = claims.Release(ctx, "order-2", "worker-a") // dead-lettered
	c, _ = claims.Claim(ctx, "order-2", "replay", time.Minute)
	fmt.Println(c.Status)
	// Output:
	// claimed
	// held_elsewhere worker-a
	// already_done
	// claimed
}

// ConsumeOne runs one delivery through the state machine on the calling
// goroutine, with the worker's real claims and driver: a handler's test
// can check each outcome without running the concurrent loop. Here the
// claims are durable (SQLite), a job dispatched twice under one key runs
// once, and a failing handler's delivery is retried after its backoff
// (1s, with jitter).
func ExampleWorker_ConsumeOne() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "consumeone-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	claims, err := sqliteclaims.Open(ctx, filepath.Join(dir, "claims.db"), nil)
	if err != nil {
		panic(err)
	}
	defer claims.Close()
	queue := memory.NewWorkQueue("invoices", memory.WorkQueueOptions{})
	w, err := worker.New(worker.Config{Driver: queue, Claims: claims})
	if err != nil {
		panic(err)
	}
	type invoice struct {
		Order int `json:"order"`
	}
	job := worker.Job{
		Name: "send-invoice", Queue: "invoices", SchemaVersion: "1", MaxAttempts: 3,
		Backoff: worker.Backoff(time.Second, 2, time.Minute),
		Handler: worker.JSON(func(ctx context.Context, d *worker.Delivery, inv invoice) error {
			if inv.Order < 0 {
				return errors.New("no such order")
			}
			fmt.Println("sending the invoice of order", inv.Order)
			return nil
		}),
	}
	if err := w.Register(job); err != nil {
		panic(err)
	}
	for _, order := range []int{1042, 1042, -1} {
		key := fmt.Sprintf("invoice:%d", order)
		if err := worker.Dispatch(ctx, queue, &job, key, invoice{Order: order}, nil); err != nil {
			panic(err)
		}
		ds, err := queue.Receive(ctx, 1)
		if err != nil {
			panic(err)
		}
		o, err := w.ConsumeOne(ctx, ds[0])
		if err != nil {
			panic(err)
		}
		fmt.Println(o.Result, o.Key, "ran:", o.Ran, "delayed:", o.Delay > 0 && o.Delay <= time.Second)
	}
	// Output:
	// sending the invoice of order 1042
	// completed invoice:1042 ran: true delayed: false
	// duplicate invoice:1042 ran: false delayed: false
	// retried invoice:-1 ran: true delayed: true
}

package worker_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine/broker/memory"
	"github.com/quarantine-dev/quarantine/internal/pgtest"
	"github.com/quarantine-dev/quarantine/worker"
	"github.com/quarantine-dev/quarantine/worker/pgclaims"
	"github.com/quarantine-dev/quarantine/worker/sqliteclaims"
)

// BenchmarkWorker measures jobs/s through the whole state machine on the
// memory driver with a no-op handler, without claims and with claims in
// memory, SQLite and PostgreSQL, in the same run: the difference is the
// cost of one effect per key (two statements per job: claim, complete).
//
//	go test -run '^$' -bench BenchmarkWorker -benchtime 5000x ./worker/
func BenchmarkWorker(b *testing.B) {
	for _, c := range []struct {
		name   string
		claims func(b *testing.B) worker.Claims
	}{
		{"claims=none", func(*testing.B) worker.Claims { return nil }},
		{"claims=memory", func(*testing.B) worker.Claims { return worker.NewMemoryClaims(nil) }},
		{"claims=sqlite", func(b *testing.B) worker.Claims {
			c, err := sqliteclaims.Open(context.Background(), filepath.Join(b.TempDir(), "claims.db"), nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { c.Close() })
			return c
		}},
		{"claims=postgres", func(b *testing.B) worker.Claims {
			c, err := pgclaims.Open(context.Background(), pgtest.URL(b), nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(c.Close)
			return c
		}},
	} {
		b.Run(c.name, func(b *testing.B) { benchWorker(b, c.claims(b)) })
	}
}

func benchWorker(b *testing.B, claims worker.Claims) {
	q := memory.NewWorkQueue("work", memory.WorkQueueOptions{})
	var done atomic.Int64
	all := make(chan struct{})
	n := int64(b.N)
	w, err := worker.New(worker.Config{
		Driver: q, Claims: claims,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnOutcome: func(o worker.Outcome) {
			if o.Result != worker.Completed {
				b.Errorf("outcome %v", o.Result)
			}
			if done.Add(1) == n {
				close(all)
			}
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	job := worker.Job{Name: "j", Queue: "work", SchemaVersion: "1", Concurrency: 8,
		Handler: func(context.Context, *worker.Job, *worker.Delivery) error { return nil }}
	if err := w.Register(job); err != nil {
		b.Fatal(err)
	}
	for i := range b.N {
		q.Put(memory.Job{ID: fmt.Sprint(i), JobName: "j", Body: []byte(`{}`),
			Headers: map[string]string{worker.HeaderIdempotencyKey: fmt.Sprintf("key-%d", i)}})
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.ResetTimer()
	start := time.Now()
	go w.Run(ctx)
	select {
	case <-all:
	case <-time.After(10 * time.Minute):
		b.Fatalf("%d of %d jobs done", done.Load(), b.N)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "jobs/s")
}

package rabbitmq

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/quarantine-dev/quarantine/worker"
	"github.com/quarantine-dev/quarantine/worker/sqliteclaims"
)

// BenchmarkWorkerRabbitMQ measures jobs/s through the WorkDriver: b.N
// jobs are published first (confirmed, not timed), then a worker with 32
// handlers that do nothing consumes them, without claims and with memory
// and SQLite claims, in the same run. The difference is the cost of
// exactly-one-effect on this broker.
//
//	go test ./broker/rabbitmq/ -run '^$' -bench WorkerRabbitMQ -benchtime 5000x
func BenchmarkWorkerRabbitMQ(b *testing.B) {
	for _, kind := range []string{"none", "memory", "sqlite"} {
		b.Run("claims="+kind, func(b *testing.B) {
			var claims worker.Claims
			switch kind {
			case "memory":
				claims = worker.NewMemoryClaims(nil)
			case "sqlite":
				c, err := sqliteclaims.Open(context.Background(), filepath.Join(b.TempDir(), "claims.db"), nil)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = c.Close() })
				claims = c
			}
			f := newWorkFixture(b, nil, func(c *WorkConfig) { c.Prefetch = 128 })
			var done atomic.Int64
			all := make(chan struct{})
			job := f.job("bench", func(context.Context, *worker.Job, *worker.Delivery) error { return nil })
			job.Concurrency = 32
			msgs := make([]amqp.Publishing, b.N)
			for i := range msgs {
				m, err := worker.NewMessage(&job, fmt.Sprintf("k-%d", i), []byte(`{"n":1}`), nil)
				if err != nil {
					b.Fatal(err)
				}
				msgs[i] = amqp.Publishing{Headers: table(m.Headers), ContentType: m.ContentType, MessageId: m.ID,
					Type: m.JobName, Timestamp: time.Now(), Body: m.Body}
			}
			f.b.publish(f.work, msgs...)
			w, err := worker.New(worker.Config{Driver: f.drv, Claims: claims, Logger: testLogger(b),
				OnOutcome: func(o worker.Outcome) {
					if o.Result == worker.Completed && done.Add(1) == int64(b.N) {
						close(all)
					}
				}})
			if err != nil {
				b.Fatal(err)
			}
			if err := w.Register(job); err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			ran := make(chan error, 1)
			b.ResetTimer()
			start := time.Now()
			go func() { ran <- w.Run(ctx) }()
			select {
			case <-all:
			case <-time.After(5 * time.Minute):
				b.Fatalf("%d of %d jobs in 5 min", done.Load(), b.N)
			}
			el := time.Since(start)
			b.StopTimer()
			cancel()
			if err := <-ran; err != nil {
				b.Error(err)
			}
			b.ReportMetric(float64(b.N)/el.Seconds(), "jobs/s")
		})
	}
}

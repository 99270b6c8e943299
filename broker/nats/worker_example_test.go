package nats_test

import (
	"context"
	"log"
	"log/slog"
	"time"

	"github.com/quarantine-dev/quarantine/broker/nats"
	"github.com/quarantine-dev/quarantine/worker"
)

// A worker consuming the stream ORDERS (subject orders.jobs) through the
// durable consumer worker-ORDERS, dead-lettering to orders.failed (a
// failure stream a quarantine collector drains), and a producer
// dispatching to it through the same driver.
func ExampleNewWorkDriver() {
	drv, err := nats.NewWorkDriver(nats.WorkConfig{
		URL: "nats://127.0.0.1:4222", Name: "orders",
		Stream: "ORDERS", Subject: "orders.jobs", FailureSubject: "orders.failed",
		AckWait: 30 * time.Second, // InProgress every 15 s while a handler runs
	}, slog.Default())
	if err != nil {
		log.Fatal(err)
	}
	defer drv.Close()
	w, err := worker.New(worker.Config{Driver: drv, Claims: worker.NewMemoryClaims(nil)})
	if err != nil {
		log.Fatal(err)
	}
	job := worker.Job{Name: "charge", Queue: "orders.jobs", SchemaVersion: "1", MaxAttempts: 5,
		Handler: func(ctx context.Context, j *worker.Job, d *worker.Delivery) error { return nil }}
	if err := w.Register(job); err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if err := worker.Dispatch(ctx, drv, &job, "order-42", map[string]int{"amount": 10}, nil); err != nil {
		log.Fatal(err)
	}
	_ = w.Run(ctx)
}

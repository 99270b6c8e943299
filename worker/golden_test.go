package worker_test

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine/broker/memory"
	"github.com/quarantine-dev/quarantine/worker"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// The failure envelope the worker writes, byte for byte, for a job
// exhausted on its second attempt (testdata/exhausted.json): the
// collectors and other languages' workers depend on this shape.
func TestDeadLetterEnvelopeGolden(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start(worker.Job{Name: "build-report", Queue: "reports", MaxAttempts: 2, Backoff: worker.BackoffFunc(func(int) time.Duration { return time.Minute }),
		Handler: func(context.Context, *worker.Job, *worker.Delivery) error { return errBoom }})
	e.q.Put(memory.Job{ID: "msg-1", JobName: "build-report", ContentType: "application/json", Body: []byte(`{"month":"2026-03"}`),
		EnqueuedAt: e.clk.Now().Add(-time.Hour),
		Headers: map[string]string{
			worker.HeaderIdempotencyKey: "report:2026-03", worker.HeaderSchemaVersion: "1",
			worker.HeaderEnqueuedAt: "2026-01-02T02:04:05Z", "traceparent": "00-abc-def-01",
		}})
	e.expect(worker.Retried, "error")
	e.idle()
	e.clk.Advance(time.Minute)
	e.expect(worker.DeadLettered, "exhausted")
	got := e.q.Failed()[0].Envelope
	path := filepath.Join("testdata", "exhausted.json")
	if *update {
		if err := os.WriteFile(path, append(got, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, bytes.TrimSuffix(want, []byte("\n"))) {
		t.Fatalf("envelope differs from %s:\ngot  %s\nwant %s", path, got, want)
	}
	decode(t, got)
}

package main

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine/store/storetest"
)

// BenchmarkPinMillion pins a dry run of QUARANTINE_BENCH_ROWS (default
// 1,000,000) messages by one filter through the built binary, on each of
// QUARANTINE_BENCH_STORES (a fresh database seeded first, as
// BenchmarkDiscardMillion's), and reports the time from the POST until
// the draft holds every message, the latency of single HTTP ingests sent
// every 250 ms meanwhile (p50, max) and the peak RSS of serve (VmHWM):
//
//	QUARANTINE_BENCH_STORES=sqlite go test -run '^$' -bench '^BenchmarkPinMillion$' -benchtime=1x -timeout 1h ./cmd/quarantine/
func BenchmarkPinMillion(b *testing.B) { eachSeededStore(b, benchPin) }

func benchPin(b *testing.B, kind string, rows int) {
	r := startSeeded(b, kind, rows)
	b.ResetTimer()
	t0 := time.Now()
	var created struct{ Replay pinBatch }
	// The burst failed before BurstNow; the ingests meanwhile fail now.
	code, body := r.client.Do(b, http.MethodPost, "/api/v1/replays", map[string]any{
		"filter": map[string]any{"failed_before": storetest.BurstNow}, "reason": "incident", "dry_run": true}, &created)
	if code != http.StatusAccepted && code != http.StatusCreated {
		b.Fatalf("POST a dry run: %d %s", code, body)
	}
	answered := time.Since(t0)
	batch := created.Replay
	for ; batch.State == "pinning"; time.Sleep(100 * time.Millisecond) {
		r.client.MustDo(b, http.StatusOK, http.MethodGet, "/api/v1/replays/"+batch.ID, nil, &batch)
		if time.Since(t0) > 10*time.Minute {
			b.Fatalf("not pinned in 10 minutes: %+v", batch)
		}
	}
	took := time.Since(t0)
	b.StopTimer()
	if batch.State != "draft" || int64(batch.Total) != r.matched {
		b.Fatalf("batch %+v, want a draft of %d", batch, r.matched)
	}
	b.ReportMetric(took.Seconds(), "pin-s")
	r.finish(b, fmt.Sprintf("%s: a dry run of %d pinned in %v (answered in %v)",
		kind, batch.Total, took.Round(time.Millisecond), answered.Round(time.Millisecond)))
}

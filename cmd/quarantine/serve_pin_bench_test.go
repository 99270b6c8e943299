package main

import (
	"bytes"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine/internal/benchseed"
	"github.com/quarantine-dev/quarantine/store/storetest"
)

// BenchmarkPinMillion pins a dry run of QUARANTINE_BENCH_ROWS (default
// 1,000,000) messages by one filter through the built binary, on each of
// QUARANTINE_BENCH_STORES (a fresh database seeded first, as
// BenchmarkDiscardMillion's), and reports the time from the POST until
// the draft holds every message, the latency of single HTTP ingests sent
// every 250 ms meanwhile (p50, max), the peak RSS of serve (VmHWM), and
// the rate at which a collector kept storing during the pin: an HTTP
// ingest of batches of 100 offering QUARANTINE_BENCH_FEED messages a
// second (default 1,000) from before the POST until the draft holds
// every message (a batch answered 2xx is committed):
//
//	QUARANTINE_BENCH_STORES=sqlite go test -run '^$' -bench '^BenchmarkPinMillion$' -benchtime=1x -timeout 1h ./cmd/quarantine/
func BenchmarkPinMillion(b *testing.B) { benchseed.EachStore(b, benchPin) }

func benchPin(b *testing.B, kind string, rows int) {
	r := startSeeded(b, kind, rows)
	feed := r.feed(b, storetest.EnvCount(b, "QUARANTINE_BENCH_FEED", 1000))
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
	stored, slowest := feed.stop(t0)
	if batch.State != "draft" || int64(batch.Total) != r.matched {
		b.Fatalf("batch %+v, want a draft of %d", batch, r.matched)
	}
	b.ReportMetric(took.Seconds(), "pin-s")
	b.ReportMetric(float64(stored)/took.Seconds(), "collected-msgs/s")
	b.ReportMetric(float64(slowest.Microseconds())/1e3, "collect-max-ms")
	r.finish(b, fmt.Sprintf("%s: a dry run of %d pinned in %v (answered in %v); meanwhile a collector offered %d msg/s stored %d (%.0f msg/s, slowest batch %v)",
		kind, batch.Total, took.Round(time.Millisecond), answered.Round(time.Millisecond), feed.rate, stored,
		float64(stored)/took.Seconds(), slowest.Round(time.Millisecond)))
}

// feeder sends batches of 100 dead letters to the HTTP ingest at a rate
// and notes when each was stored.
type feeder struct {
	rate int
	done chan struct{}
	res  chan []fed
}

// fed is one batch the ingest stored: when it was answered, after how
// long.
type fed struct {
	at   time.Time
	took time.Duration
}

// feed starts a feeder offering rate messages a second, in batches of
// 100 on a ticker (a batch waits for the one before it).
func (r *seededServe) feed(b *testing.B, rate int) *feeder {
	f := &feeder{rate: rate, done: make(chan struct{}), res: make(chan []fed, 1)}
	go func() {
		var out []fed
		tick := time.NewTicker(time.Second * 100 / time.Duration(rate))
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-f.done:
				f.res <- out
				return
			case <-tick.C:
			}
			var body bytes.Buffer
			body.WriteByte('[')
			for j := range 100 {
				if j > 0 {
					body.WriteByte(',')
				}
				fmt.Fprintf(&body, `{"envelope":"quarantine.failure/v1","job":{"name":"feed","queue":"feed","idempotency_key":"feed-%d-%d","payload":{"i":%d}},"failure":{"class":"permanent","reason":"fed during the benchmark"}}`, i, j, j)
			}
			body.WriteByte(']')
			req, _ := http.NewRequest(http.MethodPost, r.client.Base+"/api/v1/ingest", &body)
			req.Header.Set("Authorization", "Bearer "+r.client.Token)
			req.Header.Set("Content-Type", "application/json")
			t0 := time.Now()
			res, err := http.DefaultClient.Do(req)
			if err != nil || res.StatusCode >= 300 {
				b.Errorf("a fed batch: %v %v", res, err)
				continue
			}
			res.Body.Close()
			out = append(out, fed{time.Now(), time.Since(t0)})
		}
	}()
	return f
}

// stop stops the feeder and returns how many messages it stored from
// since on, and the slowest of those batches.
func (f *feeder) stop(since time.Time) (stored int, slowest time.Duration) {
	close(f.done)
	for _, x := range <-f.res {
		if x.at.After(since) {
			stored += 100
			slowest = max(slowest, x.took)
		}
	}
	return stored, slowest
}

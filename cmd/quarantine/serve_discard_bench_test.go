package main

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/benchseed"
	"github.com/quarantine-dev/quarantine/internal/testbin"
)

// BenchmarkDiscardMillion discards QUARANTINE_BENCH_ROWS (default
// 1,000,000) messages by one filter through the built binary, on each of
// QUARANTINE_BENCH_STORES (default postgres and sqlite; a fresh database
// seeded first: SQLite through InsertBatch, PostgreSQL by internal/pgseed),
// and reports the time from the POST until the operation completed, the
// latency of single HTTP ingests sent every 250 ms meanwhile (p50, max)
// and the peak RSS of serve (VmHWM). Run with -benchtime=1x:
//
//	QUARANTINE_BENCH_STORES=sqlite go test -run '^$' -bench '^BenchmarkDiscardMillion$' -benchtime=1x -timeout 1h ./cmd/quarantine/
func BenchmarkDiscardMillion(b *testing.B) { benchseed.EachStore(b, benchDiscard) }

func benchDiscard(b *testing.B, kind string, rows int) {
	r := startSeeded(b, kind, rows)
	b.ResetTimer()
	t0 := time.Now()
	var ans struct {
		Operation quarantine.DiscardOperation `json:"operation"`
	}
	r.client.MustDo(b, 202, "POST", "/api/v1/messages/discard",
		map[string]any{"filter": map[string]any{}, "expect_count": r.matched, "reason": "incident"}, &ans)
	answered := time.Since(t0)
	op := ans.Operation
	for ; op.State == quarantine.DiscardRunning; time.Sleep(100 * time.Millisecond) {
		r.client.MustDo(b, 200, "GET", "/api/v1/discards/"+op.ID, nil, &op)
		if time.Since(t0) > 30*time.Minute {
			b.Fatalf("not done in 30 minutes: %+v", op)
		}
	}
	took := time.Since(t0)
	b.StopTimer()
	if op.State != quarantine.DiscardCompleted || op.Matched != r.matched || op.Done() != r.matched {
		b.Fatalf("operation %+v, want completed over %d", op, r.matched)
	}
	b.ReportMetric(took.Seconds(), "discard-s")
	r.finish(b, fmt.Sprintf("%s: %d matched, %d discarded, %d skipped in %v (answered in %v)",
		kind, op.Matched, op.Discarded, op.Skipped, took.Round(time.Millisecond), answered.Round(time.Millisecond)))
}

// seededServe is serve on a database seeded with a burst, while single
// HTTP ingests are sent every 250 ms.
type seededServe struct {
	p       *testbin.Process
	client  testbin.API
	matched int64 // the messages seeded
	stop    chan struct{}
	lat     chan []time.Duration
}

// startSeeded seeds a fresh database of kind with rows burst messages
// (benchseed.Seed), starts the built binary on it and starts the
// ingests.
func startSeeded(b *testing.B, kind string, rows int) *seededServe {
	url, stored := benchseed.Seed(b, kind, rows)
	r := &seededServe{matched: stored, stop: make(chan struct{}), lat: make(chan []time.Duration, 1)}
	config := filepath.Join(b.TempDir(), "quarantine.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf("database: %q\nlisten: 127.0.0.1:0\n", url)), 0o600); err != nil {
		b.Fatal(err)
	}
	var args []string
	if kind == "postgres" {
		args = []string{"--migrate"}
	}
	r.p = testbin.Serve(b, testbin.Path(b), config, args...)
	r.client = r.p.API(r.p.Token)
	go r.ingest(b)
	return r
}

// ingest sends a single ingest every 250 ms until stop, then hands over
// their latencies.
func (r *seededServe) ingest(b *testing.B) {
	var ds []time.Duration
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-r.stop:
			r.lat <- ds
			return
		case <-tick.C:
		}
		body := `[{"envelope":"quarantine.failure/v1","job":{"name":"probe","queue":"probe","idempotency_key":"probe-` +
			strconv.Itoa(i) + `","payload":{"i":` + strconv.Itoa(i) + `}},"failure":{"class":"permanent","reason":"probe"}}]`
		req, _ := http.NewRequest(http.MethodPost, r.client.Base+"/api/v1/ingest", bytes.NewReader([]byte(body)))
		req.Header.Set("Authorization", "Bearer "+r.client.Token)
		req.Header.Set("Content-Type", "application/json")
		t0 := time.Now()
		res, err := http.DefaultClient.Do(req)
		d := time.Since(t0)
		if err != nil || res.StatusCode >= 300 {
			b.Errorf("ingest meanwhile: %v %v", res, err)
		} else {
			res.Body.Close()
		}
		ds = append(ds, d)
		if d > slowIngest {
			// When, to set it beside the store's own log (checkpoints,
			// the operation's chunks).
			b.Logf("slow ingest: %v, sent at %s", d.Round(time.Millisecond), t0.UTC().Format("15:04:05.000"))
		}
	}
}

// slowIngest is the latency above which an ingest is logged with its time.
const slowIngest = 250 * time.Millisecond

// finish stops the ingests, checks the audit chain, stops serve and
// reports the ingests' p50 and max and serve's peak RSS after what.
func (r *seededServe) finish(b *testing.B, what string) {
	close(r.stop)
	ds := <-r.lat
	slices.Sort(ds)
	hwm := testbin.PeakRSS(b, r.p.Cmd.Process.Pid)
	r.client.AuditVerifies(b)
	r.p.Kill()
	if len(ds) == 0 {
		b.Fatalf("%s before the first ingest: too few rows to measure", what)
	}
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1e3, "ingest-p50-ms")
	b.ReportMetric(float64(ds[len(ds)-1].Microseconds())/1e3, "ingest-max-ms")
	b.ReportMetric(float64(hwm)/1024, "rss-peak-MiB")
	fmt.Printf("%s; %d ingests: p50 %v, max %v; serve peak RSS %d MiB\n", what,
		len(ds), ds[len(ds)/2].Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond), hwm/1024)
}

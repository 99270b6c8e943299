package storetest

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store"
)

// BenchPin measures a dry run by filter of the rows messages seeded by
// SeedBurst (or pgseed): the time of CreateReplay until the draft is
// pinned, the latency of single-message inserts (one collected dead
// letter each, as an HTTP ingest or a collector stores it) made every
// 20 ms meanwhile, and the resident memory of the process during the pin.
// The draft must hold exactly the rows that matched when the pin began:
// the messages inserted meanwhile fail after BurstNow, outside the filter, and
// are not in it. Metrics: pin-s, ingest-p50-ms, ingest-max-ms, ingests,
// rss-max-MB.
func BenchPin(b *testing.B, s store.Store, rows int) {
	ctx := b.Context()
	f := quarantine.Filter{FailedBefore: BurstNow}
	stop, done := make(chan struct{}), make(chan struct{})
	var lat []time.Duration
	var rss, anon int
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			m := seedMsg("pin-ingest", int(time.Now().UnixNano()))
			m.FailedAt, m.CollectedAt = time.Now().UTC(), time.Now().UTC()
			t0 := time.Now()
			if _, err := s.InsertBatch(ctx, []*quarantine.Message{m}); err != nil {
				b.Error(err)
				return
			}
			lat = append(lat, time.Since(t0))
			rss, anon = max(rss, residentKB("VmRSS")), max(anon, residentKB("RssAnon"))
		}
	}()
	b.ResetTimer()
	t0 := time.Now()
	batch, err := s.CreateReplay(ctx, quarantine.ReplayRequest{Filter: &f, Rate: 10, DryRun: true, Reason: "bench", Actor: "bench"}, nil)
	d := time.Since(t0)
	b.StopTimer()
	close(stop)
	<-done
	if err != nil {
		b.Fatal(err)
	}
	if batch.State != quarantine.ReplayDraft || batch.Total != rows || batch.Counts[quarantine.ItemPending]+batch.Counts[quarantine.ItemSkipped] != rows {
		b.Fatalf("draft %s: total %d counts %v, want the %d seeded", batch.State, batch.Total, batch.Counts, rows)
	}
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(d.Seconds(), "pin-s")
	if len(lat) > 0 {
		b.ReportMetric(ms(lat[len(lat)/2]), "ingest-p50-ms")
		b.ReportMetric(ms(lat[len(lat)-1]), "ingest-max-ms")
	}
	b.ReportMetric(float64(len(lat)), "ingests")
	b.ReportMetric(float64(rss)/1024, "rss-max-MB")
	b.ReportMetric(float64(anon)/1024, "rss-anon-max-MB")
}

// residentKB is the process's resident memory of kind field of
// /proc/self/status (VmRSS: all of it; RssAnon: the heaps, without the
// pages of files mapped), 0 where it cannot be read.
func residentKB(field string) int {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return n
		}
	}
	return 0
}

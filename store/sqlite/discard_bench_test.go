package sqlite_test

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/sqlite"
	"github.com/quarantine-dev/quarantine/store/storetest"
)

// BenchmarkDiscardChunks discards QUARANTINE_BENCH_ROWS (default 100,000)
// burst messages by one filter, chunk after chunk of
// QUARANTINE_BENCH_CHUNK (default 2,000) straight
// through the store (no HTTP, no binary), and reports messages per
// second and the slowest chunk: the store's part of BenchmarkDiscardMillion
// (cmd/quarantine), for a CPU profile. The seeded database is kept under
// os.TempDir() and copied for each run. Run with -benchtime=1x:
//
//	go test -run '^$' -bench '^BenchmarkDiscardChunks$' -benchtime=1x -cpuprofile /tmp/discard.pprof ./store/sqlite/
func BenchmarkDiscardChunks(b *testing.B) {
	n := storetest.EnvCount(b, "QUARANTINE_BENCH_ROWS", 100_000)
	chunk := storetest.EnvCount(b, "QUARANTINE_BENCH_CHUNK", 2000)
	kept := fmt.Sprintf("quarantine-bench-sqlite-discard-%d.db", n)
	func() {
		s := openKept(b, kept, sqlite.WithoutSearchIndexer())
		storetest.SeedBurst(b, s, n, "burst")
		s.Close() // the last connection folds the WAL into the file
	}()
	for range b.N {
		b.StopTimer()
		path := filepath.Join(b.TempDir(), "discard.db")
		copyFile(b, filepath.Join(os.TempDir(), kept), path)
		s, err := sqlite.Open(b.Context(), path, sqlite.WithoutSearchIndexer())
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		t0 := time.Now()
		all := n
		op, err := s.StartDiscard(b.Context(), quarantine.Discard{Filter: &quarantine.Filter{}, ExpectCount: &all, Reason: "incident", Actor: "bench"}, 0)
		if err != nil {
			b.Fatal(err)
		}
		var slowest time.Duration
		for op.State == quarantine.DiscardRunning {
			c0 := time.Now()
			if op, _, err = s.DiscardChunk(b.Context(), op.ID, chunk); err != nil {
				b.Fatal(err)
			}
			slowest = max(slowest, time.Since(c0))
		}
		took := time.Since(t0)
		b.StopTimer()
		if op.Discarded != int64(n) {
			b.Fatalf("discarded %d of %d", op.Discarded, n)
		}
		b.ReportMetric(float64(n)/took.Seconds(), "msgs/s")
		b.ReportMetric(float64(slowest.Microseconds())/1e3, "slowest-chunk-ms")
		s.Close()
	}
}

func copyFile(b *testing.B, from, to string) {
	in, err := os.Open(from)
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		b.Fatal(err)
	}
	if err := out.Close(); err != nil {
		b.Fatal(err)
	}
}

package replay_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/broker/memory"
	"github.com/quarantine-dev/quarantine/internal/pgtest"
	"github.com/quarantine-dev/quarantine/internal/procstat"
	"github.com/quarantine-dev/quarantine/replay"
	"github.com/quarantine-dev/quarantine/store/postgres"
	"github.com/quarantine-dev/quarantine/store/sqlite"
)

// BenchmarkReplayRate replays through the engine on the embedded SQLite
// store and on PostgreSQL to an in-memory broker at several rates and
// reports the achieved rate over the configured one, measured where the
// messages arrive: n messages, at most one per slot of the schedule
// (1/rate apart, no initial burst), in the time between the first and
// the last arrival: (n - 1) / span.
//
//	go test -run '^$' -bench ReplayRate -benchtime=1x ./replay/
func BenchmarkReplayRate(b *testing.B) {
	for _, sc := range benchStores() {
		b.Run("store="+sc.name, func(b *testing.B) {
			for _, rate := range []float64{10, 100, 1000, 10000} {
				b.Run(fmt.Sprintf("rate=%g", rate), func(b *testing.B) {
					// About 6 s of messages, at least 60.
					n := min(max(int(rate*6), 60), quarantine.MaxBulk)
					for i := 0; i < b.N; i++ {
						b.StopTimer()
						ctx := context.Background()
						st := sc.open(b)
						ids := benchInsert(b, st, 0, n, false)
						waitSearchIndex(b, st)
						burst := max(int(rate/10), 1)
						broker := memory.New("orders")
						routes := &replay.Routes{Brokers: map[string]replay.Broker{"rmq": {Name: "rmq", Kind: "memory", Publisher: broker}}}
						e := replay.New(replay.Config{Store: st, Router: routes, Poll: 10 * time.Millisecond})
						ectx, cancel := context.WithCancel(ctx)
						done := make(chan struct{})
						go func() { defer close(done); _ = e.Run(ectx) }()
						b.StartTimer()
						bt, err := st.CreateReplay(ctx, quarantine.ReplayRequest{IDs: ids, Rate: rate, Burst: burst,
							Reason: "benchmark", Actor: "token:alice"}, nil)
						if err != nil {
							b.Fatal(err)
						}
						waitCompleted(b, st, bt.ID, time.Duration(float64(n)/rate*3+30)*time.Second, n)
						b.StopTimer()
						cancel()
						<-done
						got := broker.Messages("orders")
						if len(got) != n {
							b.Fatalf("%d published, want %d", len(got), n)
						}
						span := got[len(got)-1].At.Sub(got[0].At).Seconds()
						achieved := float64(n-1) / span
						b.ReportMetric(achieved, "msg/s")
						b.ReportMetric(achieved/rate, "achieved/configured")
						_ = st.Close()
					}
				})
			}
		})
	}
}

// Both stores are replay stores.
var (
	_ replay.Store = (*sqlite.Store)(nil)
	_ replay.Store = (*postgres.Store)(nil)
)

// waitSearchIndex waits until st (when it has a text-search index, built
// off the ingest path on SQLite's one writer) has indexed every message,
// so that a benchmark measures the replay alone.
func waitSearchIndex(b *testing.B, st any) {
	b.Helper()
	sl, ok := st.(interface {
		SearchLag(context.Context) (time.Duration, error)
	})
	if !ok {
		return
	}
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		lag, err := sl.SearchLag(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if lag == 0 {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("the search index still lags %s", lag)
		}
	}
}

// BenchmarkReplayUnthrottled replays 20,000 messages in two batches of
// 10,000 through one engine to an in-memory broker with no rate that
// binds, on the embedded SQLite store and on PostgreSQL, and reports the
// engine's throughput (from the first create until both batches
// completed), the time creating (pinning) the batches took, and the CPU
// each replayed message cost this process and PostgreSQL (the figure to
// compare builds by: the rate swings with the machine's other work).
//
//	go test -run '^$' -bench ReplayUnthrottled -benchtime=1x ./replay/
func BenchmarkReplayUnthrottled(b *testing.B) {
	const half = quarantine.MaxBulk
	for _, sc := range benchStores() {
		b.Run("store="+sc.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				ctx := context.Background()
				st := sc.open(b)
				broker := memory.New("orders")
				routes := &replay.Routes{Brokers: map[string]replay.Broker{"rmq": {Name: "rmq", Kind: "memory", Publisher: broker}}}
				var ids [2][]string
				for k := range ids {
					ids[k] = benchInsert(b, st, k*half, half, true)
				}
				waitSearchIndex(b, st)
				e := replay.New(replay.Config{Store: st, Router: routes, Poll: 20 * time.Millisecond})
				ectx, cancel := context.WithCancel(ctx)
				done := make(chan struct{})
				go func() { defer close(done); _ = e.Run(ectx) }()
				b.StartTimer()
				cpu0 := procstat.Read("")
				start := time.Now()
				var batches []string
				for k := range ids {
					bt, err := st.CreateReplay(ctx, quarantine.ReplayRequest{IDs: ids[k], Rate: 1e6, Burst: quarantine.MaxBulk,
						Reason: "benchmark", Actor: "token:alice"}, nil)
					if err != nil {
						b.Fatal(err)
					}
					batches = append(batches, bt.ID)
				}
				created := time.Since(start)
				for _, id := range batches {
					waitCompleted(b, st, id, 5*time.Minute, half)
				}
				took := time.Since(start)
				cpu := procstat.Read("").Sub(cpu0)
				b.StopTimer()
				cancel()
				<-done
				if got := len(broker.Messages("orders")); got != 2*half {
					b.Fatalf("%d published, want %d", got, 2*half)
				}
				b.ReportMetric(float64(2*half)/took.Seconds(), "msg/s")
				b.ReportMetric(created.Seconds(), "create-s")
				// The CPU each replayed message cost this process (the
				// engine and, on SQLite, the store) and PostgreSQL: steadier
				// than the rate on a shared machine, for comparing builds.
				if sc.name != "postgres" {
					cpu.DB = 0 // the idle server's, not the store's
				}
				cpu.Report(b, "replay", 2*half)
				_ = st.Close()
			}
		})
	}
}

// benchStore is what the benchmarks need of a store.
type benchStore interface {
	replay.Store
	InsertBatch(ctx context.Context, msgs []*quarantine.Message) ([]quarantine.InsertResult, error)
	CreateReplay(ctx context.Context, r quarantine.ReplayRequest, keyRule quarantine.KeyRuleFunc) (*quarantine.ReplayBatch, error)
	Migrate(ctx context.Context) error
	Close() error
}

// benchStores are the stores the benchmarks run on, migrated: the
// embedded SQLite store in a fresh file, PostgreSQL in a fresh schema.
func benchStores() []struct {
	name string
	open func(b *testing.B) benchStore
} {
	migrated := func(b *testing.B, st benchStore, err error) benchStore {
		if err == nil {
			err = st.Migrate(context.Background())
		}
		if err != nil {
			b.Fatal(err)
		}
		return st
	}
	return []struct {
		name string
		open func(b *testing.B) benchStore
	}{
		{"sqlite", func(b *testing.B) benchStore {
			st, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "q.db"))
			return migrated(b, st, err)
		}},
		{"postgres", func(b *testing.B) benchStore {
			st, err := postgres.Open(context.Background(), pgtest.URL(b))
			return migrated(b, st, err)
		}},
	}
}

// benchInsert stores n quarantined messages (numbers from on) of queue
// orders collected by rmq, of 1 KiB when large, and returns their ids in
// order.
func benchInsert(b *testing.B, st benchStore, from, n int, large bool) []string {
	b.Helper()
	var ids []string
	for len(ids) < n {
		msgs := make([]*quarantine.Message, min(1000, n-len(ids)))
		for j := range msgs {
			k := from + len(ids) + j
			payload := fmt.Sprintf(`{"n":%d}`, k)
			if large {
				payload = fmt.Sprintf(`{"n":%d,"pad":"%0900d"}`, k, 0)
			}
			msgs[j] = &quarantine.Message{
				Source: "rmq", SourceKind: quarantine.SourceRabbitMQ, Queue: "orders", JobName: "charge",
				MessageID: fmt.Sprintf("m-%d", k), IdempotencyKey: fmt.Sprintf("key-%d", k), KeyRule: quarantine.KeyRuleEnvelope,
				FailureClass: quarantine.ClassExhausted, Reason: "timeout",
				Payload: []byte(payload), ContentType: "application/json",
				Headers:   map[string]string{"x-trace": fmt.Sprintf("t-%d", k)},
				DedupeKey: fmt.Sprintf("d-%d", k),
			}
		}
		res, err := st.InsertBatch(context.Background(), msgs)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range res {
			ids = append(ids, r.ID)
		}
	}
	return ids
}

// waitCompleted waits until batch id completed with n items published.
func waitCompleted(b *testing.B, st benchStore, id string, timeout time.Duration, n int) {
	b.Helper()
	for deadline := time.Now().Add(timeout); ; time.Sleep(10 * time.Millisecond) {
		bt, err := st.GetReplay(context.Background(), id)
		if err != nil {
			b.Fatal(err)
		}
		if bt.State == quarantine.ReplayCompleted {
			if bt.Counts[quarantine.ItemPublished] != n {
				b.Fatalf("replay %s: %v", id, bt.Counts)
			}
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("replay %s is %s %v", id, bt.State, bt.Counts)
		}
	}
}

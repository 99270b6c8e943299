package postgres_test

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
	"github.com/quarantine-dev/quarantine/internal/pgseed"
	"github.com/quarantine-dev/quarantine/internal/pgtest"
	"github.com/quarantine-dev/quarantine/internal/procstat"
	"github.com/quarantine-dev/quarantine/internal/testbin"
	"github.com/quarantine-dev/quarantine/store/postgres"
	"github.com/quarantine-dev/quarantine/store/storetest"
)

// benchRows returns QUARANTINE_BENCH_ROWS (default 1,000,000).
func benchRows(tb testing.TB) int { return storetest.EnvCount(tb, "QUARANTINE_BENCH_ROWS", 1_000_000) }

// benchSchema is the persistent schema of the benchmarks of rows
// messages: $QUARANTINE_BENCH_SCHEMA, or bench_<rows> (another schema
// seeded by internal/pgseed, such as BenchmarkPin's pin_<rows>, saves a
// seed).
func benchSchema(rows int) string {
	return cmp.Or(os.Getenv("QUARANTINE_BENCH_SCHEMA"), "bench_"+strconv.Itoa(rows))
}

// benchStore opens the persistent schema benchSchema(rows), migrated and
// seeded with rows messages (only the missing ones are inserted, so a
// machine seeds it once).
func benchStore(tb testing.TB, rows int) *postgres.Store {
	tb.Helper()
	s := openURL(tb, pgtest.PersistentURL(tb, benchSchema(rows)))
	if err := s.Migrate(context.Background()); err != nil {
		tb.Fatal(err)
	}
	seed(tb, s, rows)
	seedSearch(tb, s) // search_bench_test.go
	return s
}

func benchInsert(b *testing.B, batch int) {
	s := openStore(b)
	storetest.BenchInsertBatch(b, s, batch)
}

// BenchmarkInsertBatch1 measures InsertBatch one message at a time.
func BenchmarkInsertBatch1(b *testing.B) { benchInsert(b, 1) }

// BenchmarkInsertBatch100 measures InsertBatch 100 messages at a time.
func BenchmarkInsertBatch100(b *testing.B) { benchInsert(b, 100) }

// BenchmarkInsertBatch1000 measures InsertBatch 1000 messages at a time.
func BenchmarkInsertBatch1000(b *testing.B) { benchInsert(b, 1000) }

// BenchmarkList measures the first and a deep page of ListMessages on
// QUARANTINE_BENCH_ROWS (default 1,000,000) seeded messages.
func BenchmarkList(b *testing.B) {
	s := benchStore(b, benchRows(b))
	storetest.BenchList(b, s)
}

// BenchmarkInsert100k inserts 100,000 messages at batch sizes 1, 100 and
// 1000 (QUARANTINE_BENCH_INSERTS overrides the count) into a fresh schema
// and reports the rates and their ratio. Run with -benchtime=1x.
func BenchmarkInsert100k(b *testing.B) {
	storetest.BenchInsertRatio(b, openStore(b), storetest.EnvCount(b, "QUARANTINE_BENCH_INSERTS", 100_000))
}

// BenchmarkOperations measures list, deep and filtered pages, sample(100),
// stratified sample(100), groups and queue stats (p50/p99 over 200 calls
// each) and the ratios deep/first and sample/list, on
// QUARANTINE_BENCH_ROWS (default 1,000,000) messages seeded once per
// machine in the persistent schema bench_<rows>. Run with -benchtime=1x.
func BenchmarkOperations(b *testing.B) {
	s := benchStore(b, benchRows(b))
	storetest.BenchOperations(b, s)
}

// EnvBenchDropIndexes names indexes (comma-separated) that
// BenchmarkInsertDrain drops from its fresh schema before it inserts:
// what an index costs ingest is the difference with a run that keeps it.
const EnvBenchDropIndexes = "QUARANTINE_BENCH_DROP_INDEXES"

// EnvBenchSchema names a persistent schema (a seeded bench_<rows>, say)
// that BenchmarkInsertDrain inserts into instead of fresh ones: what
// ingest costs on a large table, whose random index pages each take a
// full-page image after a checkpoint.
const EnvBenchSchema = "QUARANTINE_BENCH_SCHEMA"

// EnvBenchArms names, for BenchmarkInsertDrain, several variants of the
// schema measured in the same run, separated by "|": each is SQL run on
// its own fresh schema after the migrations (empty: the schema as
// migrated), for instance "|DROP INDEX messages_queue_idx". The rounds
// take turns at the arms, so that what else the machine runs weighs on
// each alike.
const EnvBenchArms = "QUARANTINE_BENCH_ARMS"

// drainMessages returns n messages as a RabbitMQ collector decodes 1 KiB
// native dead letters (x-death headers, a key from a header), numbered
// from first.
func drainMessages(run string, first, n int) []*quarantine.Message {
	failed := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	pad := strings.Repeat("x", 880)
	msgs := make([]*quarantine.Message, n)
	for j := range msgs {
		i := first + j
		key := fmt.Sprintf("order:%s:%d", run, i)
		msgs[j] = &quarantine.Message{
			Source: "bench-drain", SourceKind: quarantine.SourceRabbitMQ, Queue: "work-" + run,
			MessageID: fmt.Sprintf("%s-%d", run, i), IdempotencyKey: key, KeyRule: "header:x-idempotency-key",
			DedupeKey:    fmt.Sprintf("mid:%s-%d/xdeath:1:%d", run, i, failed.Unix()),
			FailureClass: quarantine.ClassExpired, Reason: "expired in queue work-" + run + " (RabbitMQ dead-lettered it, count 1)",
			Attempts: 1, FailedAt: failed.Add(time.Duration(i) * time.Microsecond), ContentType: "application/json",
			Payload: fmt.Appendf(nil, `{"run":%q,"order_id":%d,"customer":"cust-%06d","amount_cents":%d,"currency":"EUR","note":%q}`,
				run, i, i%5000, 100+i%9000, pad),
			Headers: map[string]string{
				"x-death":                `[{"count":1,"exchange":"","queue":"work-` + run + `","reason":"expired","routing-keys":["work-` + run + `"],"time":"2026-01-02T03:04:05Z"}]`,
				"x-first-death-exchange": "", "x-first-death-queue": "work-" + run, "x-first-death-reason": "expired",
				"x-last-death-exchange": "", "x-last-death-queue": "work-" + run, "x-last-death-reason": "expired",
				"x-idempotency-key": key,
			},
			Owner: "",
		}
	}
	return msgs
}

// BenchmarkInsertDrain measures the store as a collector drives it:
// DefaultCommits writers, each inserting batches of DefaultBatchSize 1 KiB
// native dead letters (collect's defaults), QUARANTINE_BENCH_MSGS
// messages (default 20000) per round in QUARANTINE_BENCH_ROUNDS rounds
// (default 5) into one fresh schema per arm (or, with
// QUARANTINE_BENCH_SCHEMA, into that one) with synchronous_commit on. It
// reports the median rate and PostgreSQL's CPU per message, and the
// search index's lag at the end of a round and how long the background
// indexer then takes to empty its queue (each round waits for it), and
// the WAL written per message (by the whole server: run it alone). Each
// round starts with a CHECKPOINT. It answers
// what the binary's benchmark cannot: the store's cost alone, without the
// broker and the decoder, and (with QUARANTINE_BENCH_DROP_INDEXES) what
// each index costs.
//
//	go test -run '^$' -bench InsertDrain -benchtime=1x ./store/postgres/
func BenchmarkInsertDrain(b *testing.B) {
	n := storetest.EnvCount(b, "QUARANTINE_BENCH_MSGS", 20000)
	rounds := 5
	if v, err := strconv.Atoi(os.Getenv("QUARANTINE_BENCH_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	ctx := context.Background()
	type arm struct {
		name  string
		s     *postgres.Store
		rates []float64
		db    time.Duration
		wal   int64 // bytes of WAL written during the rounds (by the whole server)
		// the search index's lag at the end of each round, and how
		// long the indexer took to catch up after it
		lags, catchUps []float64
	}
	var setups []string
	if v := os.Getenv(EnvBenchArms); v != "" {
		setups = strings.Split(v, "|")
	} else {
		var drops []string
		if v := strings.TrimSpace(os.Getenv(EnvBenchDropIndexes)); v != "" {
			for _, idx := range strings.Split(v, ",") {
				drops = append(drops, "DROP INDEX "+pgx.Identifier{strings.TrimSpace(idx)}.Sanitize())
			}
		}
		setups = []string{strings.Join(drops, "; ")}
	}
	arms := make([]*arm, len(setups))
	for i, setup := range setups {
		u := pgtest.URL(b)
		if name := os.Getenv(EnvBenchSchema); name != "" {
			u = pgtest.PersistentURL(b, name)
		}
		s := openURL(b, u+"&synchronous_commit=on")
		if err := s.Migrate(ctx); err != nil {
			b.Fatal(err)
		}
		if strings.TrimSpace(setup) != "" {
			if _, err := s.Pool().Exec(ctx, setup); err != nil {
				b.Fatalf("arm %d: %s: %v", i, setup, err)
			}
		}
		arms[i] = &arm{name: "arm" + strconv.Itoa(i), s: s}
		if len(arms) == 1 {
			arms[i].name = ""
		}
	}
	batch, writers := collect.DefaultBatchSize, collect.DefaultCommits
	for b.Loop() {
		for r := range rounds {
			for x := range arms {
				a := arms[(x+r)%len(arms)]
				run := fmt.Sprintf("%d-%d", time.Now().UnixNano(), r)
				batches := make(chan []*quarantine.Message, n/batch+1)
				for i := 0; i < n; i += batch {
					batches <- drainMessages(run, i, min(batch, n-i))
				}
				close(batches)
				// Every round starts after a checkpoint: each arm pays
				// the full-page images of the pages it dirties first.
				if _, err := a.s.Pool().Exec(ctx, `CHECKPOINT`); err != nil {
					b.Fatal(err)
				}
				var wal0 int64
				if err := a.s.Pool().QueryRow(ctx, `SELECT pg_current_wal_lsn() - '0/0'`).Scan(&wal0); err != nil {
					b.Fatal(err)
				}
				before, _ := procstat.CPU("postgres")
				start := time.Now()
				var wg sync.WaitGroup
				for range writers {
					wg.Go(func() {
						for msgs := range batches {
							if _, err := a.s.InsertBatch(ctx, msgs); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				took := time.Since(start)
				after, _ := procstat.CPU("postgres")
				a.db += after - before
				var wal1 int64
				if err := a.s.Pool().QueryRow(ctx, `SELECT pg_current_wal_lsn() - '0/0'`).Scan(&wal1); err != nil {
					b.Fatal(err)
				}
				a.wal += wal1 - wal0
				a.rates = append(a.rates, float64(n)/took.Seconds())
				lag, catchUp := indexerCatchUp(b, a.s)
				a.lags, a.catchUps = append(a.lags, lag.Seconds()), append(a.catchUps, catchUp.Seconds())
				b.Logf("round %d %s: %.0f msg/s; search index lag %.1f s at the end, caught up %.1f s later",
					r, a.name, float64(n)/took.Seconds(), lag.Seconds(), catchUp.Seconds())
			}
		}
	}
	b.ReportMetric(0, "ns/op")
	for _, a := range arms {
		prefix := a.name
		if prefix != "" {
			prefix += "_"
		}
		b.ReportMetric(testbin.Median(a.rates), prefix+"msgs/s")
		b.ReportMetric(float64(a.db.Microseconds())/float64(len(a.rates)*n), prefix+"db_cpu_µs/msg")
		b.ReportMetric(float64(a.wal)/float64(len(a.rates)*n), prefix+"wal_B/msg")
		b.ReportMetric(testbin.Median(a.lags), prefix+"lag_s")
		b.ReportMetric(testbin.Median(a.catchUps), prefix+"catchup_s")
	}
}

// indexerCatchUp returns the search index's lag (SearchLag) right after
// a drain, and how long the store's background indexer then took to
// empty its queue (polled every 20 ms, for up to 5 minutes).
func indexerCatchUp(b *testing.B, s *postgres.Store) (lag, took time.Duration) {
	b.Helper()
	lag, err := s.SearchLag(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for l := lag; l > 0; <-tick.C {
		if time.Since(t0) > 5*time.Minute {
			b.Fatalf("the search index still lags %v after 5 minutes", l)
		}
		if l, err = s.SearchLag(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
	return lag, time.Since(t0)
}

// BenchmarkBurst measures GET /api/v1/queues, /overview, a /metrics
// scrape and the other first pages (storetest.BenchBurst) with
// QUARANTINE_BENCH_ROWS (default 1,000,000) dead letters collected within
// the hour before storetest.BurstNow, seeded once per machine in the
// persistent schema burst_<rows> (internal/pgseed). Run with
// -benchtime=1x; QUARANTINE_BENCH_CALLS (default 20) calls per read:
//
//	go test -run '^$' -bench '^BenchmarkBurst$' -benchtime=1x -timeout 1h ./store/postgres/
func BenchmarkBurst(b *testing.B) {
	rows := benchRows(b)
	s := openURL(b, pgtest.PersistentURL(b, "burst_"+strconv.Itoa(rows)), postgres.WithClock(func() time.Time { return storetest.BurstNow }))
	if err := s.Migrate(context.Background()); err != nil {
		b.Fatal(err)
	}
	pgseed.SeedWindow(b, s.Pool(), rows, storetest.BurstNewest, storetest.BurstSpan)
	// A schema seeded before the minute counts (migration 0016, whose
	// backfill takes the last day by the database's clock) counts them.
	if _, err := s.Pool().Exec(context.Background(), `SELECT quarantine_recount() WHERE NOT EXISTS (SELECT 1 FROM inflow_minutes)`); err != nil {
		b.Fatal(err)
	}
	storetest.BenchBurst(b, s, rows, storetest.BurstCalls(b))
}

// BenchmarkPin measures a dry run by filter of QUARANTINE_BENCH_ROWS
// (default 1,000,000) messages seeded as for BenchmarkBurst, in the
// persistent schema pin_<rows> (the inserts made meanwhile would change
// the burst's), with single-message inserts every 20 ms meanwhile
// (storetest.BenchPin). Run once:
//
//	go test -run '^$' -bench '^BenchmarkPin$' -benchtime=1x -timeout 1h ./store/postgres/
func BenchmarkPin(b *testing.B) {
	rows := benchRows(b)
	s := openURL(b, pgtest.PersistentURL(b, "pin_"+strconv.Itoa(rows)))
	if err := s.Migrate(context.Background()); err != nil {
		b.Fatal(err)
	}
	pgseed.SeedWindow(b, s.Pool(), rows, storetest.BurstNewest, storetest.BurstSpan)
	storetest.BenchPin(b, s, rows)
}

package sqs

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/quarantine-dev/quarantine/collect"
	"github.com/quarantine-dev/quarantine/internal/pgtest"
	"github.com/quarantine-dev/quarantine/internal/procstat"
	"github.com/quarantine-dev/quarantine/store/postgres"
)

// envBenchMsgs overrides the number of messages each drain of the
// benchmark moves.
const envBenchMsgs = "QUARANTINE_BENCH_MSGS"

func benchMsgs(b *testing.B) int {
	n := 20000
	if s := os.Getenv(envBenchMsgs); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			b.Fatalf("%s=%q is not a positive integer", envBenchMsgs, s)
		}
		n = v
	}
	return n
}

// BenchmarkDrain compares, in one run, the collector (SQS -> collector ->
// PostgreSQL with synchronous_commit on) with a bare drain of the same
// emulator by as many receivers (ReceiveMessage of 10 + DeleteMessageBatch,
// no store). It reports both rates and collector/bare. Run it with
// -benchtime=1x; QUARANTINE_BENCH_MSGS sets the messages per drain (20k).
func BenchmarkDrain(b *testing.B) {
	n := benchMsgs(b)
	e := newEnv(b)
	ctx := context.Background()
	u, err := url.Parse(pgtest.URL(b))
	if err != nil {
		b.Fatal(err)
	}
	q := u.Query()
	q.Set("synchronous_commit", "on")
	u.RawQuery = q.Encode()
	st, err := postgres.Open(ctx, u.String())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	if err := st.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	payloads := bodies(n, "bench")

	// ABBA order (bare, collector, collector, bare), half the messages
	// each, so that load from elsewhere on the machine drifting during
	// the run weighs on both sides alike.
	half := payloads[:n/2]
	var bareTime, collTime time.Duration
	var bareCPU, collCPU procstat.Usage
	for i := 0; b.Loop(); i++ {
		for k, bare := range []bool{true, false, false, true} {
			// Each drain starts from a full queue with no other queue
			// loaded: goaws scans every message of every queue.
			b.StopTimer()
			_, qurl := e.queue("bench", nil)
			fill(b, e, qurl, half)
			b.StartTimer()
			cpu := procstat.Read("goaws")
			if bare {
				bareTime += bareDrain(b, e, qurl, len(half), DefaultReceivers)
				bareCPU = bareCPU.Add(procstat.Read("goaws").Sub(cpu))
				continue
			}
			cfg := testConfig(e.endpoint, qurl)
			cfg.Receivers = DefaultReceivers
			collTime += collectorDrain(b, cfg, st, len(half), fmt.Sprintf("bench-%d-%d", i, k))
			collCPU = collCPU.Add(procstat.Read("goaws").Sub(cpu))
		}
	}
	total := float64(2 * len(half) * b.N)
	bare := total / bareTime.Seconds()
	coll := total / collTime.Seconds()
	b.ReportMetric(bare, "bare_msgs/s")
	b.ReportMetric(coll, "collector_msgs/s")
	b.ReportMetric(coll/bare, "ratio")
	// Where each message's CPU went (Linux): goaws, PostgreSQL, this process.
	bareCPU.Report(b, "bare", 2*len(half)*b.N)
	collCPU.Report(b, "collector", 2*len(half)*b.N)
}

// fill sends bodies to the queue with 8 concurrent batch senders.
func fill(b *testing.B, e *env, url string, bodies []string) {
	var wg sync.WaitGroup
	per := (len(bodies) + 7) / 8
	for lo := 0; lo < len(bodies); lo += per {
		part := bodies[lo:min(lo+per, len(bodies))]
		wg.Go(func() { e.send(url, part, nil) })
	}
	wg.Wait()
	if d := e.depth(url); d != len(bodies) {
		b.Fatalf("queue holds %d, want %d", d, len(bodies))
	}
}

// bareDrain empties the queue with receivers goroutines that receive 10
// and delete them at once, and returns how long it took.
func bareDrain(b *testing.B, e *env, url string, n, receivers int) time.Duration {
	var deleted atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range receivers {
		wg.Go(func() {
			ctx := context.Background()
			for deleted.Load() < int64(n) {
				out, err := e.client.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: aws.String(url),
					MaxNumberOfMessages: 10, WaitTimeSeconds: 1, MessageAttributeNames: []string{"All"},
					MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}})
				if err != nil {
					b.Error(err)
					return
				}
				if len(out.Messages) == 0 {
					continue
				}
				in := &awssqs.DeleteMessageBatchInput{QueueUrl: aws.String(url)}
				for i, m := range out.Messages {
					in.Entries = append(in.Entries, types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
				}
				res, err := e.client.DeleteMessageBatch(ctx, in)
				if err != nil {
					b.Error(err)
					return
				}
				deleted.Add(int64(len(res.Successful)))
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}

// collectorDrain runs a collector with the default batch size and linger
// until it stored n messages, and returns how long that took.
func collectorDrain(b *testing.B, cfg Config, st collect.Inserter, n int, name string) time.Duration {
	src, err := NewSource(name, cfg, quietLogger())
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	ctx, cancel := context.WithCancel(context.Background())
	c := collect.New(collect.Config{Name: name, Source: src, Store: st, Logger: quietLogger()})
	done := make(chan struct{})
	start := time.Now()
	go func() { defer close(done); _ = c.Run(ctx) }()
	for c.Stats().Stored < uint64(n) {
		time.Sleep(5 * time.Millisecond)
	}
	took := time.Since(start)
	cancel()
	<-done
	if s := c.Stats(); s.Stored != uint64(n) || s.Duplicates != 0 {
		b.Fatalf("collector stats: %+v", s)
	}
	return took
}

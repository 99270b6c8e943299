package sqs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/quarantine-dev/quarantine/internal/procstat"
	"github.com/quarantine-dev/quarantine/internal/testbin"
)

// envelopes1K returns n canonical failure envelopes of about 1 KiB (a
// worker's dead letters, as the worker package writes them) whose job
// queue is "orders-"+run.
func envelopes1K(n int, run string) []string {
	pad := strings.Repeat("x", 560)
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf(`{"envelope":"quarantine.failure/v1","job":{"id":"%s-%d","name":"charge-order","queue":"orders-%s","idempotency_key":"order:%s:%d","schema_version":"3","attempts":5,"enqueued_at":"2026-01-02T02:04:05.123456Z","content_type":"application/json","headers":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","x-idempotency-key":"order:%s:%d","x-schema-version":"3"},"payload":{"run":%q,"order_id":%d,"customer":"cust-%06d","amount_cents":%d,"currency":"EUR","lines":[{"sku":"sku-%d","qty":%d}],"note":%q}},"failure":{"class":"exhausted","reason":"attempt 5 of 5 failed: payment gateway timeout after 30s (order %d)","failed_at":"2026-01-02T03:05:05.654321Z","first_failed_at":"2026-01-02T03:04:05Z"}}`,
			run, i, run, run, i, run, i, run, i, i%5000, 100+i%9000, i%300, 1+i%4, pad, i%7)
	}
	return out
}

// jobs1K returns n jobs of about 1 KiB, the bodies a worker of queue
// receives; their idempotency key is /order_id.
func jobs1K(n int, run string) []string {
	pad := strings.Repeat("x", 880)
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf(`{"run":%q,"order_id":"%s-%d","customer":"cust-%06d","amount_cents":%d,"currency":"EUR","note":%q}`,
			run, run, i, i%5000, 100+i%9000, pad)
	}
	return out
}

// redrive makes SQS itself dead-letter n jobs of about 1 KiB: a work
// queue whose RedrivePolicy (maxReceiveCount 1) targets a fresh
// dead-letter queue, and a failing worker that receives and never
// deletes until every job was moved. It returns the dead-letter queue's
// URL and the work queue's name (the messages' queue in the quarantine).
func redrive(b *testing.B, e *env, n int) (dlq, work string) {
	b.Helper()
	ctx := context.Background()
	_, dlq = e.queue("bench-native-dlq", nil)
	attrs, err := e.client.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: aws.String(dlq),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
	if err != nil {
		b.Fatal(err)
	}
	policy := fmt.Sprintf(`{"maxReceiveCount":"1","deadLetterTargetArn":%q}`, attrs.Attributes["QueueArn"])
	work, src := e.queue("bench-native", map[string]string{"VisibilityTimeout": "1", "RedrivePolicy": policy})
	fill(b, e, src, jobs1K(n, work))
	var wg sync.WaitGroup
	for range DefaultReceivers {
		wg.Go(func() {
			for e.depth(src) > 0 {
				if _, err := e.client.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: aws.String(src), MaxNumberOfMessages: 10}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if got := e.depth(dlq); got != n {
		b.Fatalf("the redrive moved %d of %d jobs", got, n)
	}
	deleteQueue(e, src)
	return dlq, work
}

// pipelinedBareDrain empties the queue the way the collector's Source
// works, without decoding or storing: receivers goroutines long-poll 10
// messages at a time and hand each batch to ackParallel deleters
// (DeleteMessageBatch), so that a receiver never waits for a deletion.
// It returns how long it took until n messages were deleted.
func pipelinedBareDrain(b *testing.B, e *env, url string, n, receivers int) time.Duration {
	var deleted atomic.Int64
	batches := make(chan []types.Message, receivers)
	done := make(chan struct{})
	var once sync.Once
	ctx := context.Background()
	start := time.Now()
	var rg, dg sync.WaitGroup
	for range receivers {
		rg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				out, err := e.client.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: aws.String(url),
					MaxNumberOfMessages: 10, WaitTimeSeconds: 1, MessageAttributeNames: []string{"All"},
					MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}})
				if err != nil {
					b.Error(err)
					once.Do(func() { close(done) })
					return
				}
				if len(out.Messages) > 0 {
					select {
					case batches <- out.Messages:
					case <-done:
						return
					}
				}
			}
		})
	}
	for range ackParallel {
		dg.Go(func() {
			for ms := range batches {
				in := &awssqs.DeleteMessageBatchInput{QueueUrl: aws.String(url)}
				for i, m := range ms {
					in.Entries = append(in.Entries, types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
				}
				res, err := e.client.DeleteMessageBatch(ctx, in)
				if err != nil {
					b.Error(err)
					once.Do(func() { close(done) })
					continue
				}
				if deleted.Add(int64(len(res.Successful))) >= int64(n) {
					once.Do(func() { close(done) })
				}
			}
		})
	}
	<-done
	took := time.Since(start)
	rg.Wait()
	close(batches)
	dg.Wait()
	return took
}

func deleteQueue(e *env, url string) {
	_, _ = e.client.DeleteQueue(context.Background(), &awssqs.DeleteQueueInput{QueueUrl: aws.String(url)})
}

// sqsBenchKind is one kind of message BenchmarkBinaryVsBareDrain drains:
// fill makes a fresh dead-letter queue of n messages and returns its URL
// and the queue the messages are recorded under (source_queue, or the
// envelopes' job queue).
type sqsBenchKind struct {
	name string
	fill func(b *testing.B, e *env, n int) (dlq, queue string)
}

var sqsBenchKinds = []sqsBenchKind{
	{name: "envelope", fill: func(b *testing.B, e *env, n int) (string, string) {
		name, url := e.queue("bench-envelope-dlq", nil)
		fill(b, e, url, envelopes1K(n, name))
		return url, "orders-" + name
	}},
	{name: "native", fill: redrive},
}

// BenchmarkBinaryVsBareDrain runs the built quarantine binary as a user
// runs it (`quarantine serve` with one SQS collector and the default
// batch size, linger, commits, receivers and long poll) against a bare
// aws-sdk-go-v2 drain of the same messages (as many receivers, each a
// loop of ReceiveMessage of 10 handing the batch to as many deleters as
// the Source's Ack runs, DeleteMessageBatch, no store: a bare loop that
// receives, then deletes, then receives is slower than the collector,
// about 1,600 msg/s against 7,000 on goaws), on two kinds of message:
//
//   - envelope: canonical failure envelopes of about 1 KiB sent to the
//     dead-letter queue (what the worker package dead-letters);
//   - native: jobs of about 1 KiB that SQS moved there itself (a
//     RedrivePolicy with maxReceiveCount 1 and a worker that never
//     deletes), whose idempotency key is /order_id.
//
// In each of QUARANTINE_BENCH_ROUNDS rounds (default 5) and for each kind
// it fills a fresh queue with QUARANTINE_BENCH_MSGS messages (default
// 20000; goaws scans every message of a queue on each receive, so fewer
// keeps the fills short) before each drain: bare, then the binary on
// PostgreSQL (synchronous_commit on) and on SQLite
// (QUARANTINE_BENCH_STORES and QUARANTINE_BENCH_KINDS narrow them). The
// binary is timed from its first receive until every message is stored;
// its start-up is not. It reports median rates, the median per-round
// ratios to the bare drain and the CPU per message of goaws, PostgreSQL
// and the binary.
//
//	scripts/services.sh goaws
//	go test -run '^$' -bench BinaryVsBareDrain -benchtime=1x ./broker/sqs/
func BenchmarkBinaryVsBareDrain(b *testing.B) {
	n := benchMsgs(b)
	rounds := testbin.BenchRounds(b)
	stores, kinds := testbin.BenchStores()
	e := newEnv(b)
	bin := testbin.Path(b)
	databases := map[string]string{}
	counters := map[string]func(string) int{}
	for _, s := range stores {
		databases[s] = testbin.BenchDatabase(b, s)
		counters[s] = testbin.StoredCounter(b, databases[s])
	}
	type drain struct {
		testbin.Drained
		kind sqsBenchKind
		run  func(dlq, queue string, r int) time.Duration
	}
	var drains []*drain
	migrated := map[string]bool{}
	for _, k := range sqsBenchKinds {
		if !kinds[k.name] {
			continue
		}
		drains = append(drains, &drain{Drained: testbin.Drained{Kind: k.name, Name: "bare"}, kind: k, run: func(dlq, _ string, _ int) time.Duration {
			return pipelinedBareDrain(b, e, dlq, n, DefaultReceivers)
		}})
		for _, s := range stores {
			d := &drain{Drained: testbin.Drained{Kind: k.name, Name: s}, kind: k}
			d.run = func(dlq, queue string, r int) time.Duration {
				config := filepath.Join(b.TempDir(), "quarantine.yaml")
				// The default configuration of one collector, and the one
				// idempotency rule a user of native dead letters writes.
				yaml := fmt.Sprintf(`database: %q
listen: 127.0.0.1:0
idempotency:
  - queues: ["*"]
    json_pointer: /order_id
collectors:
  - name: bench-%s-%d
    kind: sqs
    region: us-east-1
    queue_url: %q
    source_queue: %q
    endpoint: %q
    protocol: query
`, databases[s], k.name, r, dlq, queue, e.endpoint)
				if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
					b.Fatal(err)
				}
				var args []string
				if s == "postgres" && !migrated[s] {
					args, migrated[s] = []string{"--migrate"}, true
				}
				took, cpu := testbin.Drain(b, bin, config, "msg=receiving", n, func() int { return counters[s](queue) }, args...)
				d.Self += cpu
				return took
			}
			drains = append(drains, d)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for r := range rounds {
			for _, d := range drains {
				b.StopTimer()
				dlq, queue := d.kind.fill(b, e, n)
				procstat.Quiet("goaws", 0.05, 250*time.Millisecond, 20*time.Second)
				before := procstat.Read("goaws")
				b.StartTimer()
				took := d.run(dlq, queue, r)
				b.StopTimer()
				used := procstat.Read("goaws").Sub(before)
				d.Broker += used.Broker
				d.DB += used.DB
				if d.Name == "bare" {
					d.Self += used.Self
				}
				deleteQueue(e, dlq)
				d.Round(b, r, n, took)
			}
		}
	}
	testbin.ReportDrains(b, drains, float64(n*rounds*b.N))
}

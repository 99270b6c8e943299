package sqs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
	"github.com/quarantine-dev/quarantine/internal/testenv"
	"github.com/quarantine-dev/quarantine/store/sqlite"
)

// envEndpoint names the variable that points the tests at an SQS emulator.
const envEndpoint = testenv.SQSEndpoint

// goawsAccount is the account goaws puts in its queue URLs.
const goawsAccount = "100010001000"

// endpoint returns the emulator's URL (QUARANTINE_TEST_SQS_ENDPOINT: the
// project's private goaws, which scripts/services.sh starts and records).
// It skips tb when the emulator does not answer, or fails it under
// CI=true.
func endpoint(tb testing.TB) string {
	tb.Helper()
	ep := testenv.Require(tb, envEndpoint, "the SQS emulator")
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(ep + "/health")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return ep
		}
		err = fmt.Errorf("status %s", resp.Status)
	}
	testenv.Unavailable(tb, envEndpoint, fmt.Sprintf("SQS emulator not available at %s: %v", ep, err))
	return ""
}

// env is one test's broker: a client and the endpoint it talks to.
type env struct {
	tb       testing.TB
	endpoint string
	client   *awssqs.Client
}

func newEnv(tb testing.TB) *env {
	tb.Helper()
	ep := endpoint(tb)
	c, err := newClient(context.Background(), testConfig(ep, "http://x/"+goawsAccount+"/unused"), quietLogger())
	if err != nil {
		tb.Fatal(err)
	}
	return &env{tb: tb, endpoint: ep, client: c}
}

// testConfig is a validated Config for the emulator at ep.
func testConfig(ep, queueURL string) Config {
	c := Config{Region: "us-east-1", Endpoint: ep, Protocol: ProtocolQuery, QueueURL: queueURL,
		SourceQueue: "jobs", WaitTime: time.Second, VisibilityTimeout: 30 * time.Second}
	if err := c.Validate(); err != nil {
		panic(err)
	}
	return c
}

// queue creates a queue with a unique name and the given attributes,
// deletes it when the test ends, and returns its URL on the endpoint.
func (e *env) queue(prefix string, attrs map[string]string) (name, url string) {
	e.tb.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name = prefix + "-" + hex.EncodeToString(b)
	if attrs == nil {
		attrs = map[string]string{}
	}
	if _, ok := attrs["VisibilityTimeout"]; !ok {
		attrs["VisibilityTimeout"] = "30"
	}
	ctx := context.Background()
	if _, err := e.client.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs}); err != nil {
		e.tb.Fatalf("create queue %s: %v", name, err)
	}
	url = e.endpoint + "/" + goawsAccount + "/" + name
	e.tb.Cleanup(func() {
		_, _ = e.client.DeleteQueue(context.Background(), &awssqs.DeleteQueueInput{QueueUrl: aws.String(url)})
	})
	return name, url
}

// send publishes bodies (with attrs on each) and returns the MessageIds in
// order: in batches of 10 without attributes, one by one with them (goaws
// drops the attributes of SendMessageBatch entries).
func (e *env) send(url string, bodies []string, attrs map[string]types.MessageAttributeValue) []string {
	e.tb.Helper()
	ids := make([]string, 0, len(bodies))
	if attrs != nil {
		for _, b := range bodies {
			ids = append(ids, e.sendOne(url, b, attrs))
		}
		return ids
	}
	for lo := 0; lo < len(bodies); lo += 10 {
		in := &awssqs.SendMessageBatchInput{QueueUrl: aws.String(url)}
		for i, b := range bodies[lo:min(lo+10, len(bodies))] {
			in.Entries = append(in.Entries, types.SendMessageBatchRequestEntry{
				Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(b)})
		}
		out, err := e.client.SendMessageBatch(context.Background(), in)
		if err != nil {
			e.tb.Fatalf("send: %v", err)
		}
		if len(out.Failed) > 0 || len(out.Successful) != len(in.Entries) {
			e.tb.Fatalf("send: %d failed, %d of %d sent", len(out.Failed), len(out.Successful), len(in.Entries))
		}
		byID := map[string]string{}
		for _, s := range out.Successful {
			byID[*s.Id] = *s.MessageId
		}
		for i := range in.Entries {
			ids = append(ids, byID[strconv.Itoa(i)])
		}
	}
	return ids
}

// sendOne publishes one message with its own attributes.
func (e *env) sendOne(url, body string, attrs map[string]types.MessageAttributeValue) string {
	e.tb.Helper()
	out, err := e.client.SendMessage(context.Background(), &awssqs.SendMessageInput{
		QueueUrl: aws.String(url), MessageBody: aws.String(body), MessageAttributes: attrs})
	if err != nil {
		e.tb.Fatalf("send: %v", err)
	}
	return *out.MessageId
}

// depth returns the number of messages in the queue, in flight included
// (goaws counts them in ApproximateNumberOfMessages).
func (e *env) depth(url string) int {
	e.tb.Helper()
	out, err := e.client.GetQueueAttributes(context.Background(), &awssqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages}})
	if err != nil {
		e.tb.Fatalf("queue attributes: %v", err)
	}
	n, _ := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)])
	return n
}

// held returns how many messages the queue still holds: visible ones and
// those received but not deleted (in flight, invisible until their
// visibility timeout ends).
func (e *env) held(url string) int {
	e.tb.Helper()
	visible, inflight := types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible
	out, err := e.client.GetQueueAttributes(context.Background(), &awssqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{visible, inflight}})
	if err != nil {
		e.tb.Fatalf("queue attributes: %v", err)
	}
	a, errA := strconv.Atoi(out.Attributes[string(visible)])
	b, errB := strconv.Atoi(out.Attributes[string(inflight)])
	if errA != nil || errB != nil {
		e.tb.Fatalf("queue attributes without both counts: %v", out.Attributes)
	}
	return a + b
}

// bodies returns n JSON job bodies numbered from 0.
func bodies(n int, prefix string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf(`{"order_id":"%s-%d","amount":%d}`, prefix, i, i)
	}
	return out
}

// reader is the part of a store the assertions read.
type reader interface {
	ListMessages(ctx context.Context, f quarantine.Filter) (quarantine.MessagePage, error)
	GetMessage(ctx context.Context, id string) (*quarantine.Message, error)
}

// testStore is what the tests need of a store.
type testStore interface {
	reader
	collect.Inserter
}

// sqliteStore opens a migrated SQLite store in a temporary directory.
func sqliteStore(tb testing.TB) testStore {
	tb.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(tb.TempDir(), "q.db"))
	if err != nil {
		tb.Fatal(err)
	}
	if err := st.Migrate(ctx); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	return st
}

// allMessages lists every stored message of a store, with its payload
// when payloads is true.
func allMessages(tb testing.TB, st reader, payloads bool) []*quarantine.Message {
	tb.Helper()
	ctx := context.Background()
	var out []*quarantine.Message
	f := quarantine.Filter{Limit: quarantine.MaxLimit}
	for {
		page, err := st.ListMessages(ctx, f)
		if err != nil {
			tb.Fatal(err)
		}
		for _, m := range page.Messages {
			if payloads {
				full, err := st.GetMessage(ctx, m.ID)
				if err != nil {
					tb.Fatal(err)
				}
				m = full
			}
			out = append(out, m)
		}
		if page.Next == nil {
			return out
		}
		f.After = page.Next
	}
}

// running is a collector running in the background.
type running struct {
	c      *collect.Collector
	src    *Source
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// stop ends the collector, waits for it and closes its source.
func (r *running) stop() {
	r.once.Do(func() {
		r.cancel()
		<-r.done
		r.src.Close()
	})
}

// startCollector runs a collector named name on cfg's queue into st; it
// stops when the test ends.
func startCollector(tb testing.TB, name string, cfg Config, st collect.Inserter, p *collect.Preparer) *running {
	tb.Helper()
	src, err := NewSource(name, cfg, quietLogger())
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := collect.New(collect.Config{Name: name, Source: src, Store: st, Preparer: p,
		BatchSize: 100, Linger: 20 * time.Millisecond, MaxBackoff: time.Second, Logger: quietLogger()})
	r := &running{c: c, src: src, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		_ = c.Run(ctx)
	}()
	tb.Cleanup(r.stop)
	return r
}

// quietLogger logs warnings and errors only, to stderr when -v.
func quietLogger() *slog.Logger {
	var w io.Writer = io.Discard
	if testing.Verbose() {
		w = os.Stderr
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// eventually polls cond every 50ms until it holds or d passes.
func eventually(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// exactlyOnce checks that the stored messages are exactly ids, once each,
// by MessageID of the SQS message (DedupeKey is not on the API).
func exactlyOnce(tb testing.TB, msgs []*quarantine.Message, ids []string, idOf func(*quarantine.Message) string) {
	tb.Helper()
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	seen := make(map[string]int, len(msgs))
	for _, m := range msgs {
		seen[idOf(m)]++
	}
	var dup, extra []string
	for id, n := range seen {
		if n > 1 {
			dup = append(dup, id)
		}
		if !want[id] {
			extra = append(extra, id)
		}
	}
	missing := 0
	for id := range want {
		if seen[id] == 0 {
			missing++
		}
	}
	if len(dup) > 0 || len(extra) > 0 || missing > 0 || len(msgs) != len(ids) {
		tb.Fatalf("stored %d messages for %d sent: %d missing, duplicates %s, unexpected %s",
			len(msgs), len(ids), missing, strings.Join(first(dup, 5), ","), strings.Join(first(extra, 5), ","))
	}
}

func first(s []string, n int) []string { return s[:min(n, len(s))] }

package sqs

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/replay"
	"github.com/quarantine-dev/quarantine/store/sqlite"
	"github.com/quarantine-dev/quarantine/worker"
)

// The whole loop on goaws: a job that fails permanently reaches the
// quarantine (the SQS collector on the failure queue, into SQLite) with
// the right envelope; the operator edits its payload and replays it (the
// replay engine with the SQS publisher) to the work queue; the worker
// completes it exactly once, with the edited payload.
//
// The idempotency key: the publisher sends it (x-idempotency-key) as a
// message attribute of SendMessageBatch, and goaws v0.4.5 drops the
// attributes of batch entries. The replayed message then arrives with no
// key and no job name: the driver's WorkConfig.JobName names the job, and
// the worker runs it unclaimed. So the key is asserted where it can be:
// on the wire (a recorder between the publisher and goaws) and, on a
// server that keeps batch attributes (real SQS), on the delivery itself
// and the worker's outcome.
func TestWorkEndToEndQuarantineEditReplay(t *testing.T) {
	t.Parallel()
	e := newWorkEnv(t, "work-e2e", 2*time.Second)
	drv := e.driver(4*time.Second, func(c *WorkConfig) { c.JobName = "charge" })
	ctx := context.Background()
	const (
		key      = "order-7"
		original = `{"order_id":7,"currency":"eur"}`
		edited   = `{"order_id":7,"currency":"EUR"}`
	)

	// The worker: lowercase currencies are refused for good.
	j := &journal{}
	job := chargeJob(e.work, j, func(d *worker.Delivery) error {
		if strings.Contains(string(d.Body), `"eur"`) {
			return worker.Permanent(errors.New("currency must be upper case"))
		}
		return nil
	})
	startWorker(t, j, drv, worker.NewMemoryClaims(nil), job)

	// The quarantine: a collector on the failure queue.
	st := sqliteStore(t).(*sqlite.Store)
	cfg := testConfig(e.endpoint, e.failURL)
	cfg.SourceQueue = e.work
	startCollector(t, "orders-sqs", cfg, st, nil)

	dispatch(t, drv, &job, key, original)
	eventually(t, 30*time.Second, "the dead-letter", func() bool { return j.count(worker.DeadLettered) == 1 })
	var msgs []*quarantine.Message
	eventually(t, 30*time.Second, "the quarantined message", func() bool {
		msgs = allMessages(t, st, true)
		return len(msgs) > 0
	})
	if len(msgs) != 1 {
		t.Fatalf("%d quarantined messages, want 1", len(msgs))
	}
	m := msgs[0]
	first := j.runList()[0]
	if m.MessageID != first.id || m.JobName != "charge" || m.Queue != e.work || m.IdempotencyKey != key ||
		m.Attempts != 1 || m.FailureClass != quarantine.ClassPermanent || string(m.Payload) != original ||
		m.SchemaVersion != "1" || m.Reason != "currency must be upper case" || m.Status != quarantine.StatusQuarantined {
		t.Fatalf("quarantined %+v (payload %s)", m, m.Payload)
	}

	// Edit and replay.
	if _, err := st.EditPayload(ctx, quarantine.PayloadEdit{MessageID: m.ID, IfMatch: m.PayloadSHA256,
		Payload: []byte(edited), Reason: "currency was lowercase", Actor: "token:alice"}); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder(t, e.endpoint)
	routes := &replay.Routes{Brokers: map[string]replay.Broker{
		"orders-sqs": {Name: "orders-sqs", Kind: "sqs", Publisher: publisherAt(t, rec.url)},
	}}
	req := quarantine.ReplayRequest{IDs: []string{m.ID}, Rate: 100, Reason: "currency fixed", Actor: "token:alice"}
	if err := req.Validate(0); err != nil {
		t.Fatal(err)
	}
	b, err := st.CreateReplay(ctx, req, nil)
	if err != nil {
		t.Fatal(err)
	}
	eng := replay.New(replay.Config{Store: st, Router: routes, Poll: 20 * time.Millisecond, Logger: quietLogger()})
	ectx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = eng.Run(ectx) })
	t.Cleanup(func() { cancel(); wg.Wait() })

	eventually(t, 30*time.Second, "the replay to complete", func() bool {
		got, err := st.GetReplay(ctx, b.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got.State == quarantine.ReplayCompleted
	})
	eventually(t, 30*time.Second, "the worker to complete the replayed job", func() bool { return j.count(worker.Completed) == 1 })
	quiet(t, j, e) // no copy left: no second run, no second failure

	runs := j.runList()
	if len(runs) != 2 || j.count(worker.DeadLettered) != 1 {
		t.Fatalf("%d runs (want the failed one and the replay), %d dead-letters", len(runs), j.count(worker.DeadLettered))
	}
	replayed := runs[1]
	if replayed.body != edited {
		t.Fatalf("the replayed job ran with %s, want the edited %s", replayed.body, edited)
	}
	sent := rec.sent(edited)
	if sent[replay.HeaderIdempotencyKey] != key || sent[replay.HeaderReplayID] != b.ID || sent[replay.HeaderJobName] != "charge" {
		t.Fatalf("the publisher sent attributes %v, want the key %s, the job name and the replay id", sent, key)
	}
	done := j.first(worker.Completed)
	if len(replayed.headers) > 0 { // a server that keeps batch attributes
		if replayed.key != key || done.Key != key || replayed.headers[replay.HeaderReplayID] != b.ID {
			t.Fatalf("replayed delivery key %q (outcome key %q), headers %v", replayed.key, done.Key, replayed.headers)
		}
	} else {
		t.Logf("goaws dropped the batch attributes: the replay ran unclaimed under WorkConfig.JobName; the key %s was sent on the wire", key)
		if done.Key != "" {
			t.Fatalf("outcome key %q for a delivery without attributes", done.Key)
		}
	}
	if got := allMessages(t, st, false); len(got) != 1 || got[0].Status != quarantine.StatusReplayed {
		t.Fatalf("the quarantine holds %d messages (first %s), want the one, replayed", len(got), got[0].Status)
	}
	if n := e.held(e.workURL); n != 0 {
		t.Fatalf("work queue still holds %d messages", n)
	}
	if n := e.held(e.failURL); n != 0 {
		t.Fatalf("failure queue holds %d messages", n)
	}
}

package nats

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/replay"
	"github.com/quarantine-dev/quarantine/worker"
)

// The whole loop on NATS: a job that fails permanently is dead-lettered
// by the worker, collected from the failure stream into the quarantine
// with the right envelope, edited, replayed to the work subject by the
// replay engine, and completed by the worker once, with the edited
// payload and the original idempotency key. Replaying it again is
// absorbed by the claim.
func TestWorkerOverNATSQuarantineEditReplay(t *testing.T) {
	t.Parallel()
	e := newWorkEnv(t)
	ctx := context.Background()
	d := e.driver(e.config(5 * time.Second))
	fx := newEffects()
	var mu sync.Mutex
	var completedKeys []string
	job := e.job(func(_ context.Context, _ *worker.Job, d *worker.Delivery) error {
		fx.ran()
		var p struct {
			Report string `json:"report"`
			Poison bool   `json:"poison"`
		}
		if err := json.Unmarshal(d.Body, &p); err != nil {
			return worker.Permanent(err)
		}
		if p.Poison {
			return worker.Permanent(errors.New("the report template is poisoned"))
		}
		fx.effect(d)
		mu.Lock()
		completedKeys = append(completedKeys, d.Header(worker.HeaderIdempotencyKey))
		mu.Unlock()
		return nil
	})
	claims := worker.NewMemoryClaims(nil)
	r := startWorker(t, d, claims, job)

	st := openStore(t)
	runCollector(t, "natsw", Config{URL: e.url, Stream: e.failStream, AckWait: 5 * time.Second}, st, nil, 10)

	dispatch(t, d, &job, "report-7", `{"report":"r7","poison":true}`)
	eventually(t, 10*time.Second, "the dead letter", func() bool { return r.count(worker.DeadLettered) == 1 })
	eventually(t, 10*time.Second, "the quarantine to hold it", func() bool { return storedCount(t, st, "natsw") == 1 })
	m, err := st.GetMessage(ctx, allMessages(t, st, "natsw")[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if m.JobName != "build-report" || m.Queue != e.subject || m.IdempotencyKey != "report-7" ||
		m.FailureClass != quarantine.ClassPermanent || m.Attempts != 1 || m.SchemaVersion != "1" ||
		m.KeyRule != quarantine.KeyRuleEnvelope || string(m.Payload) != `{"report":"r7","poison":true}` {
		t.Fatalf("quarantined %+v", m)
	}

	fixed := []byte(`{"report":"r7","poison":false}`)
	if _, err := st.EditPayload(ctx, quarantine.PayloadEdit{MessageID: m.ID, IfMatch: m.PayloadSHA256, Payload: fixed,
		Reason: "remove the poisoned template", Actor: "token:alice"}); err != nil {
		t.Fatal(err)
	}
	pub := NewPublisher(Config{URL: e.url}, "natsw", quietLogger())
	t.Cleanup(func() { _ = pub.Close() })
	eng := replay.New(replay.Config{Store: st, Logger: quietLogger(), Poll: 50 * time.Millisecond, Router: &replay.Routes{
		Brokers: map[string]replay.Broker{"natsw": {Name: "natsw", Kind: "nats", Publisher: pub}}}})
	ectx, cancel := context.WithCancel(ctx)
	engDone := make(chan struct{})
	go func() { defer close(engDone); _ = eng.Run(ectx) }()
	t.Cleanup(func() { cancel(); <-engDone })

	{
		req := quarantine.ReplayRequest{IDs: []string{m.ID}, Rate: 10, Reason: "template fixed", Actor: "token:alice"}
		if err := req.Validate(0); err != nil {
			t.Fatal(err)
		}
		b, err := st.CreateReplay(ctx, req, nil)
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, "the replay to complete", func() bool {
			got, err := st.GetReplay(ctx, b.ID)
			return err == nil && got.State == quarantine.ReplayCompleted && got.Counts[quarantine.ItemPublished] == 1
		})
	}
	eventually(t, 10*time.Second, "the replayed job to complete", func() bool { return r.count(worker.Completed) == 1 })
	if n := fx.doneCount("report-7"); n != 1 {
		t.Fatalf("%d effects for report-7, want 1", n)
	}
	fx.mu.Lock()
	payload := fx.payloads["report-7"]
	fx.mu.Unlock()
	if payload != string(fixed) {
		t.Fatalf("the worker ran payload %s, want the edited %s", payload, fixed)
	}
	mu.Lock()
	if len(completedKeys) != 1 || completedKeys[0] != "report-7" {
		t.Fatalf("completed keys %v", completedKeys)
	}
	mu.Unlock()
	if storedCount(t, st, "natsw") != 1 {
		t.Fatal("the replay was quarantined again")
	}

	// What the engine published: the edited payload under the original
	// key. Published once more (a crash between publish and record
	// repeats it, under a message id the duplicate window no longer
	// knows), the worker acks it without running the handler.
	ws, err := e.js.Stream(ctx, e.stream)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := ws.GetMsg(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if raw.Header.Get(replay.HeaderIdempotencyKey) != "report-7" || raw.Header.Get(replay.HeaderReplayID) == "" ||
		raw.Header.Get(replay.HeaderOriginalID) == "" || string(raw.Data) != string(fixed) {
		t.Fatalf("replayed message %v %s", raw.Header, raw.Data)
	}
	again := replay.Outgoing{Queue: raw.Subject, MessageID: raw.Header.Get("Nats-Msg-Id") + "-again",
		ContentType: raw.Header.Get("Content-Type"), Payload: raw.Data, Headers: map[string]string{}}
	for k := range raw.Header {
		if k != "Nats-Msg-Id" && k != "Content-Type" {
			again.Headers[k] = raw.Header.Get(k)
		}
	}
	if res := pub.Publish(ctx, []replay.Outgoing{again}); res[0].Outcome != quarantine.ItemPublished {
		t.Fatalf("republish: %+v", res[0])
	}
	eventually(t, 10*time.Second, "the duplicate to be absorbed", func() bool { return r.count(worker.Duplicate) == 1 })
	eventually(t, 5*time.Second, "the consumer to drain", func() bool { return consumerDrained(t, e.js, e.stream, d.Consumer()) })
	if n, runs := fx.doneCount("report-7"), fx.runCount(); n != 1 || runs != 2 {
		t.Fatalf("%d effects and %d runs, want 1 and 2 (the poisoned run, the replay)", n, runs)
	}
	if v, err := claims.Violations(ctx); err != nil || len(v) > 0 {
		t.Fatalf("claims: %v %v", v, err)
	}
}

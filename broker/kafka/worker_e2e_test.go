package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/brokertest"
	"github.com/quarantine-dev/quarantine/replay"
	"github.com/quarantine-dev/quarantine/worker"
)

// The whole loop on Kafka: a job that fails permanently is dead-lettered
// by the worker to the failure topic, collected into the quarantine,
// edited, replayed to the work topic by the replay engine (through the
// kafka Publisher), and completed by the worker once, with the edited
// payload and the original idempotency key. Replaying it again is
// absorbed by the claim.
func TestWorkerOverKafkaQuarantineEditReplay(t *testing.T) {
	t.Parallel()
	e := newWorkEnv(t)
	ctx := context.Background()
	d := e.driver()
	x := brokertest.NewRuns()
	var mu sync.Mutex
	payloads := map[string]string{}
	job := reportJob(func(_ context.Context, _ *worker.Job, d *worker.Delivery) error {
		x.Ran()
		var p struct {
			Poison bool `json:"poison"`
		}
		if err := json.Unmarshal(d.Body, &p); err != nil {
			return worker.Permanent(err)
		}
		if p.Poison {
			return worker.Permanent(errors.New("the report template is poisoned"))
		}
		x.Effect(d)
		mu.Lock()
		payloads[d.Header(worker.HeaderIdempotencyKey)] = string(d.Body)
		mu.Unlock()
		return nil
	})
	claims := worker.NewMemoryClaims(nil)
	r := brokertest.StartWorker(t, d, claims, job)

	st := openStore(t)
	cfg := e.k.config("quarantine", failureTopic)
	runCollector(t, "kafkaw", cfg, st, 10)

	brokertest.Dispatch(t, d, &job, "report-7", `{"report":"r7","poison":true}`)
	eventually(t, 10*time.Second, "the dead letter", func() bool { return r.Count(worker.DeadLettered) == 1 })
	eventually(t, 10*time.Second, "the quarantine to hold it", func() bool { return len(allMessages(t, st, "kafkaw")) == 1 })
	m, err := st.GetMessage(ctx, allMessages(t, st, "kafkaw")[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if m.JobName != "build-report" || m.Queue != workTopic || m.IdempotencyKey != "report-7" ||
		m.FailureClass != quarantine.ClassPermanent || m.KeyRule != quarantine.KeyRuleEnvelope {
		t.Fatalf("quarantined %+v", m)
	}
	fixed := []byte(`{"report":"r7","poison":false}`)
	if _, err := st.EditPayload(ctx, quarantine.PayloadEdit{MessageID: m.ID, IfMatch: m.PayloadSHA256, Payload: fixed,
		Reason: "remove the poisoned template", Actor: "token:alice"}); err != nil {
		t.Fatal(err)
	}
	pub, err := NewPublisher(cfg, "kafkaw", quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	eng := replay.New(replay.Config{Store: st, Logger: quietLogger(), Poll: 50 * time.Millisecond, Router: &replay.Routes{
		Brokers: map[string]replay.Broker{"kafkaw": {Name: "kafkaw", Kind: "kafka", Publisher: pub}}}})
	ectx, cancel := context.WithCancel(ctx)
	engDone := make(chan struct{})
	go func() { defer close(engDone); _ = eng.Run(ectx) }()
	t.Cleanup(func() { cancel(); <-engDone })

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
	eventually(t, 10*time.Second, "the replayed job to complete", func() bool { return r.Count(worker.Completed) == 1 })
	mu.Lock()
	if payloads["report-7"] != string(fixed) {
		t.Fatalf("the worker ran payload %s, want the edited %s", payloads["report-7"], fixed)
	}
	mu.Unlock()

	// The replayed record, produced once more (a crash between publish and
	// record), is acked as a duplicate without running.
	recs := e.k.consume(workTopic, 2)
	again := recs[len(recs)-1]
	if v, _ := header(again, replay.HeaderReplayID); v != b.ID || string(again.Key) != "report-7" {
		t.Fatalf("replayed record key %q headers %v", again.Key, again.Headers)
	}
	e.k.produce(again)
	eventually(t, 10*time.Second, "the duplicate to be absorbed", func() bool { return r.Count(worker.Duplicate) == 1 })
	eventually(t, 10*time.Second, "offsets committed", e.drained)
	if n, runs := x.Effects("report-7"), x.Count(); n != 1 || runs != 2 {
		t.Fatalf("%d effects and %d runs, want 1 and 2 (the poisoned run, the replay)", n, runs)
	}
	if len(allMessages(t, st, "kafkaw")) != 1 {
		t.Fatal("the replay was quarantined again")
	}
	if v, err := claims.Violations(ctx); err != nil || len(v) > 0 {
		t.Fatalf("claims: %v %v", v, err)
	}
}

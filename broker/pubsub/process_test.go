package pubsub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	ps "cloud.google.com/go/pubsub/v2"

	bt "github.com/quarantine-dev/quarantine/internal/brokertest"
	"github.com/quarantine-dev/quarantine/internal/testbin"
	"github.com/quarantine-dev/quarantine/replay"
	"github.com/quarantine-dev/quarantine/store/sqlite"
	"github.com/quarantine-dev/quarantine/worker"
)

// writeConfig writes a configuration of the binary with one pubsub
// collector, named name, of subscription sub on s.
func writeConfig(t *testing.T, s *server, name, sub, more string) (config, db string) {
	t.Helper()
	dir := t.TempDir()
	db = filepath.Join(dir, "q.db")
	config = filepath.Join(dir, "quarantine.yaml")
	yaml := fmt.Sprintf("database: \"sqlite:%s\"\nlisten: 127.0.0.1:0\nreplay: {canary: 0, poll: 100ms}\ncollectors:\n"+
		"  - name: %s\n    kind: pubsub\n    project: %s\n    subscription: %s\n    endpoint: %s\n    linger: 5ms\n%s",
		db, name, project, sub, s.srv.Addr, more)
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return config, db
}

// Through the built binary: a worker dead-letters a poisoned job to the
// failure topic; `quarantine serve` collects it; its payload is edited
// and it is replayed through the API to the work topic, where the worker
// completes it once with the edited payload.
func TestBinaryCollectEditReplayWorkerCompletes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the quarantine binary")
	}
	t.Parallel()
	e := newWorkEnv(t, 0)
	d := e.driver()
	x := bt.NewRuns()
	var mu sync.Mutex
	bodies := map[string]string{}
	job := reportJob(func(_ context.Context, _ *worker.Job, d *worker.Delivery) error {
		x.Ran()
		var p struct {
			Poison bool `json:"poison"`
		}
		if err := json.Unmarshal(d.Body, &p); err != nil || p.Poison {
			return worker.Permanent(errors.New("the report template is poisoned"))
		}
		x.Effect(d)
		mu.Lock()
		bodies[d.Header(worker.HeaderIdempotencyKey)] = string(d.Body) + " " + d.Header(replay.HeaderReplayID)
		mu.Unlock()
		return nil
	})
	claims := worker.NewMemoryClaims(nil)
	r := bt.StartWorker(t, d, claims, job)
	bt.Dispatch(t, d, &job, "report-7", `{"report":"r7","poison":true}`)
	eventually(t, 10*time.Second, "the dead letter", func() bool { return r.Count(worker.DeadLettered) == 1 })

	config, _ := writeConfig(t, e.s, "reports-pubsub", failureSub, "")
	p := testbin.Serve(t, testbin.Path(t), config)
	api := p.API(p.Token)
	m := api.WaitMessages(t, workTopic, 1, patience*30*time.Second)[0]
	if m.IdempotencyKey != "report-7" {
		t.Fatalf("collected %+v", m)
	}
	fixed := `{"poison":false,"report":"r7"}`
	status, raw := api.DoHeaders(t, "PUT", "/api/v1/messages/"+m.ID+"/payload", map[string]string{"If-Match": `"` + m.PayloadSHA256 + `"`},
		map[string]any{"payload": json.RawMessage(fixed), "reason": "remove the poisoned template"}, nil)
	if status != 200 {
		t.Fatalf("edit: %d %s", status, raw)
	}
	b := api.CreateReplay(t, map[string]any{"filter": map[string]any{"queue": []string{workTopic}}, "expect_count": 1, "rate": 10, "reason": "template fixed"})
	b = api.WaitReplay(t, b.ID, patience*30*time.Second, "completed")
	if b.Counts["published"] != 1 {
		t.Fatalf("replay counts %v", b.Counts)
	}
	eventually(t, 20*time.Second, "the replayed job to complete", func() bool { return r.Count(worker.Completed) == 1 })
	eventually(t, 10*time.Second, "everything acked", e.settled)
	mu.Lock()
	defer mu.Unlock()
	if got := bodies["report-7"]; got != fixed+" "+b.ID {
		t.Fatalf("the worker completed %q, want the edited payload of replay %s", got, b.ID)
	}
	if x.Effects("report-7") != 1 || x.Count() != 2 {
		t.Fatalf("%d effects, %d runs; want 1 and 2", x.Effects("report-7"), x.Count())
	}
	api.AuditVerifies(t)
}

// TestSIGKILLCollectorProcess kills `quarantine serve` with SIGKILL again
// and again in the middle of draining a dead-letter subscription, and
// restarts it: in the end every message is stored exactly once and the
// subscription holds nothing unacknowledged.
func TestSIGKILLCollectorProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the quarantine binary")
	}
	t.Parallel()
	bin := testbin.Path(t)
	const n = 3000
	s := newServer(t)
	s.topic("orders.dlq")
	s.subscription("orders.dlq-q", "orders.dlq", "", 0)
	ms := make([]*ps.Message, n)
	for i := range ms {
		ms[i] = forwarded(&ps.Message{Data: []byte(`{"i":` + strconv.Itoa(i) + `}`)}, "orders-worker", "5", time.Now())
	}
	s.publish("orders.dlq", ms...)
	acked := func() int {
		k := 0
		for _, m := range s.srv.Messages() {
			if m.Acks > 0 {
				k++
			}
		}
		return k
	}
	config, db := writeConfig(t, s, "killed", "orders.dlq-q", "    batch_size: 50\n")
	kills := 0
	for round := range 4 {
		before := acked()
		if before >= n {
			break
		}
		p := testbin.Serve(t, bin, config)
		deadline := time.Now().Add(patience * 60 * time.Second)
		for acked() <= before && !p.Exited(0) {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: no progress; output:\n%s", round, p.Output())
			}
			time.Sleep(2 * time.Millisecond)
		}
		if p.Exited(0) {
			t.Fatalf("round %d: the process exited:\n%s", round, p.Output())
		}
		time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
		p.Kill()
		kills++
	}
	// What a killed process held comes back when its ack deadline (10 s)
	// passes.
	p := testbin.Serve(t, bin, config)
	eventually(t, 90*time.Second, "every message acknowledged", func() bool { return acked() == n })
	p.Signal(t, syscall.SIGTERM)
	if !p.Exited(30 * time.Second) {
		t.Fatalf("the process did not stop on SIGTERM:\n%s", p.Output())
	}
	st, err := sqlite.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	got := allMessages(t, st, "killed")
	seen := map[string]bool{}
	for _, m := range got {
		if seen[m.MessageID] {
			t.Fatalf("message %s stored twice", m.MessageID)
		}
		seen[m.MessageID] = true
	}
	if len(got) != n {
		t.Fatalf("%d messages stored after %d kills, want %d", len(got), kills, n)
	}
	t.Logf("%d kills", kills)
	if kills < 2 {
		t.Fatalf("the drain ended after %d kills", kills)
	}
}

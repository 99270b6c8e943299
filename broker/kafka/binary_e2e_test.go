package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine/internal/brokertest"
	"github.com/quarantine-dev/quarantine/internal/testbin"
	"github.com/quarantine-dev/quarantine/replay"
	"github.com/quarantine-dev/quarantine/worker"
)

// Through the built binary: a worker dead-letters a poisoned job to the
// failure topic; `quarantine serve` collects it; its payload is edited
// and it is replayed through the API to the work topic (the collector's
// cluster), where the worker completes it once with the edited payload.
func TestBinaryCollectEditReplayWorkerCompletes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the quarantine binary")
	}
	t.Parallel()
	e := newWorkEnv(t)
	d := e.driver()
	x := brokertest.NewRuns()
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
	r := brokertest.StartWorker(t, d, worker.NewMemoryClaims(nil), job)
	brokertest.Dispatch(t, d, &job, "report-7", `{"report":"r7","poison":true}`)
	eventually(t, 10*time.Second, "the dead letter", func() bool { return r.Count(worker.DeadLettered) == 1 })

	dir := t.TempDir()
	config := filepath.Join(dir, "quarantine.yaml")
	yaml := fmt.Sprintf("database: \"sqlite:%s\"\nlisten: 127.0.0.1:0\nreplay: {canary: 0, poll: 100ms}\ncollectors:\n"+
		"  - name: reports-kafka\n    kind: kafka\n    brokers: [%s]\n    topics: [%s]\n    linger: 5ms\n",
		filepath.Join(dir, "q.db"), strings.Join(e.k.addrs, ", "), failureTopic)
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
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
	eventually(t, 10*time.Second, "the work topics committed to their end", e.drained)
	eventually(t, 10*time.Second, "the failure topic committed to its end", func() bool { return e.k.committedLag(DefaultGroup, failureTopic) == 0 })
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

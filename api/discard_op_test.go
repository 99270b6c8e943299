package api_test

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/api"
	"github.com/quarantine-dev/quarantine/internal/rules"
)

// withDiscards runs the discards by filter with cfg.
func withDiscards(cfg rules.DiscardConfig) envOpt {
	return func(c *api.Config) { c.Discards = rules.NewDiscards(c.Store, cfg, c.Logger) }
}

type discardAnswer struct {
	bulkJSON
	Operation *quarantine.DiscardOperation `json:"operation"`
}

// waitDiscard reads operation id until it is no longer running.
func (e *env) waitDiscard(id, secret string) quarantine.DiscardOperation {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		var op quarantine.DiscardOperation
		e.get("/api/v1/discards/"+id, secret).want(e.t, http.StatusOK).decode(e.t, &op)
		if op.State != quarantine.DiscardRunning || time.Now().After(deadline) {
			return op
		}
		<-tick.C
	}
}

// A discard by filter above the threshold needs the previewed count; a
// large one answers at once (202) and GET of its operation follows it to
// the end; a small one is applied before the answer, with its ids.
func TestDiscardOperation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withDiscards(rules.DiscardConfig{ConfirmAbove: 10, SyncMax: 5, Chunk: 4}))
	seedSet(e) // 45 in billing, 5 in orders.x
	billing := map[string]any{"queue": []string{"billing"}}

	e.json(http.MethodPost, "/api/v1/messages/discard", e.operator, map[string]any{"filter": billing, "reason": "r"}).
		problem(t, http.StatusUnprocessableEntity, "/expect_count")
	e.json(http.MethodPost, "/api/v1/messages/discard", e.operator, map[string]any{"filter": billing, "expect_count": 44, "reason": "r"}).
		problem(t, http.StatusConflict, "/expect_count")
	if n := e.count(e.viewer, "&status=discarded"); n != 0 {
		t.Fatalf("%d discarded after refusals", n)
	}

	r := e.json(http.MethodPost, "/api/v1/messages/discard", e.operator, map[string]any{"filter": billing, "expect_count": 45, "reason": "incident"}).
		want(t, http.StatusAccepted)
	var ans discardAnswer
	r.decode(t, &ans)
	if ans.Operation == nil || ans.Matched != 45 || len(ans.Changed) != 0 || r.header.Get("Location") != "/api/v1/discards/"+ans.Operation.ID {
		t.Fatalf("202 answer %+v, Location %q", ans, r.header.Get("Location"))
	}
	op := e.waitDiscard(ans.Operation.ID, e.viewer)
	if op.State != quarantine.DiscardCompleted || op.Matched != 45 || op.Discarded != 45 || op.Skipped != 0 || op.Actor != "token:operator" || op.FinishedAt == nil {
		t.Fatalf("operation at the end: %+v", op)
	}
	if n := e.count(e.viewer, "&queue=billing&status=discarded"); n != 45 {
		t.Fatalf("%d of billing discarded, want 45", n)
	}
	var audit struct{ Items []auditEvent }
	e.get("/api/v1/audit?action=message.discard&limit=1000", e.admin).want(t, http.StatusOK).decode(t, &audit)
	if n := len(chunkDiscards(t, audit.Items)); n != 45 || len(audit.Items) >= 45 {
		t.Fatalf("%d message.discard events naming %d messages, want one per chunk naming all 45", len(audit.Items), n)
	}
	// A message's history holds its chunk's event.
	var one struct{ Items []message }
	e.get("/api/v1/messages?queue=billing&status=discarded&limit=1", e.viewer).want(t, http.StatusOK).decode(t, &one)
	var hist struct{ Items []auditEvent }
	e.get("/api/v1/audit?message="+one.Items[0].ID+"&action=message.discard", e.admin).want(t, http.StatusOK).decode(t, &hist)
	if len(hist.Items) != 1 || hist.Items[0].Subject != op.ID {
		t.Fatalf("history of a discarded message: %+v, want its chunk's event", hist.Items)
	}
	if v := e.verify(""); !v.OK {
		t.Fatalf("audit chain: %+v", v)
	}

	// Small: applied before the answer, with its ids.
	small := e.discardMany(e.operator, map[string]any{"filter": map[string]any{"queue": []string{"orders.x"}}, "reason": "small"})
	if small.Matched != 5 || len(small.Changed) != 5 || !slices.IsSorted(small.Changed) {
		t.Fatalf("small discard by filter: %+v", small)
	}

	// Who sees an operation.
	payments := e.token("payments-viewer", quarantine.RoleViewer, "payments")
	e.get("/api/v1/discards/"+op.ID, payments).problem(t, http.StatusNotFound, "id")
	e.get("/api/v1/discards/"+quarantine.NewID(time.Now()), e.viewer).problem(t, http.StatusNotFound, "id")
	e.get("/api/v1/discards/not-an-id", e.viewer).problem(t, http.StatusNotFound, "id")
	e.get("/api/v1/discards/"+op.ID, "").problem(t, http.StatusUnauthorized, "")
}

// An operation left running by a process that died, or failed, is
// resumed by POST /api/v1/discards/{id}/resume: it runs again from its
// last committed chunk and completes with every message of its set
// discarded once (one message.discard event each); a completed one is
// 409; a viewer may not resume; a token that may not see it gets 404.
func TestDiscardResume(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withDiscards(rules.DiscardConfig{Chunk: 4}))
	seedSet(e) // 45 in billing, 5 in orders.x
	ctx := t.Context()
	billing := quarantine.Filter{Queue: []string{"billing"}}

	// Left by a dead process: recorded, one chunk applied, never run here.
	op, err := e.store.StartDiscard(ctx, quarantine.Discard{Filter: &billing, Reason: "incident", Actor: "token:operator"}, -1)
	if err != nil {
		t.Fatal(err)
	}
	if op, _, err = e.store.DiscardChunk(ctx, op.ID, 10); err != nil || op.Discarded != 10 {
		t.Fatalf("first chunk: %+v, %v", op, err)
	}
	path := "/api/v1/discards/" + op.ID + "/resume"
	e.json(http.MethodPost, path, e.viewer, nil).problem(t, http.StatusForbidden, "")
	other := e.token("orders-operator", quarantine.RoleOperator, "orders")
	e.json(http.MethodPost, path, other, nil).problem(t, http.StatusNotFound, "id")
	var denied struct{ Items []auditEvent }
	e.get("/api/v1/audit?action=access.denied&limit=1000", e.admin).want(t, http.StatusOK).decode(t, &denied)
	if n := len(denied.Items); n != 2 || denied.Items[1].Subject != op.ID || denied.Items[1].Actor != "token:orders-operator" {
		t.Fatalf("access.denied events %+v, want the viewer's and the other team's on %s", denied.Items, op.ID)
	}
	e.json(http.MethodPost, "/api/v1/discards/"+quarantine.NewID(time.Now())+"/resume", e.operator, nil).problem(t, http.StatusNotFound, "id")
	if got, _ := e.store.GetDiscard(ctx, op.ID); got.Discarded != 10 || got.State != quarantine.DiscardRunning {
		t.Fatalf("refused resumes changed the operation: %+v", got)
	}

	r := e.json(http.MethodPost, path, e.operator, nil).want(t, http.StatusOK)
	var resumed quarantine.DiscardOperation
	r.decode(t, &resumed)
	if resumed.ID != op.ID || resumed.Discarded < 10 || r.header.Get("Location") != "/api/v1/discards/"+op.ID {
		t.Fatalf("resume answered %+v, Location %q", resumed, r.header.Get("Location"))
	}
	done := e.waitDiscard(op.ID, e.viewer)
	if done.State != quarantine.DiscardCompleted || done.Discarded != 45 || done.Skipped != 0 || done.Matched != 45 {
		t.Fatalf("resumed operation at the end: %+v", done)
	}
	if n := e.count(e.viewer, "&queue=billing&status=discarded"); n != 45 {
		t.Fatalf("%d of billing discarded, want 45", n)
	}
	var audit struct{ Items []auditEvent }
	e.get("/api/v1/audit?action=message.discard&limit=1000", e.admin).want(t, http.StatusOK).decode(t, &audit)
	seen := chunkDiscards(t, audit.Items)
	if len(seen) != 45 {
		t.Fatalf("%d message.discard events, want 45", len(seen))
	}
	e.json(http.MethodPost, path, e.operator, nil).problem(t, http.StatusConflict, "")

	// Failed: resumed once its cause is gone.
	orders := quarantine.Filter{Queue: []string{"orders.x"}}
	op, err = e.store.StartDiscard(ctx, quarantine.Discard{Filter: &orders, Reason: "again", Actor: "token:operator"}, -1)
	if err != nil {
		t.Fatal(err)
	}
	if op, _, err = e.store.DiscardChunk(ctx, op.ID, 2); err != nil {
		t.Fatal(err)
	}
	if err := e.store.FailDiscard(ctx, op.ID, "the database went away"); err != nil {
		t.Fatal(err)
	}
	var failed quarantine.DiscardOperation
	e.get("/api/v1/discards/"+op.ID, e.viewer).want(t, http.StatusOK).decode(t, &failed)
	if failed.State != quarantine.DiscardFailed || failed.Error == "" || failed.Discarded != 2 {
		t.Fatalf("failed operation: %+v", failed)
	}
	e.json(http.MethodPost, "/api/v1/discards/"+op.ID+"/resume", e.operator, nil).want(t, http.StatusOK)
	done = e.waitDiscard(op.ID, e.viewer)
	if done.State != quarantine.DiscardCompleted || done.Discarded != 5 || done.Error != "" || done.FinishedAt == nil {
		t.Fatalf("resumed failed operation at the end: %+v", done)
	}
	var resumes struct{ Items []auditEvent }
	e.get("/api/v1/audit?action=discard.resume&limit=1000", e.admin).want(t, http.StatusOK).decode(t, &resumes)
	if len(resumes.Items) != 2 || resumes.Items[0].Actor != "token:operator" || resumes.Items[1].Subject != op.ID {
		t.Fatalf("discard.resume events %+v, want the two accepted resumes (not the refused ones)", resumes.Items)
	}
	if v := e.verify(""); !v.OK {
		t.Fatalf("audit chain: %+v", v)
	}
}

// chunkDiscards returns the messages the chunk events among evs (the
// message.discard events of discard operations) name, failing on a
// message named twice, an event whose count or digest is wrong, or any
// other event.
func chunkDiscards(t *testing.T, evs []auditEvent) map[string]bool {
	t.Helper()
	seen := map[string]bool{}
	for _, ev := range evs {
		d, ok := quarantine.ParseDiscardChunk(quarantine.AuditEvent{Action: ev.Action, Subject: ev.Subject, Details: ev.Details})
		if !ok || d.Check() != nil {
			t.Fatalf("not a chunk's discard event: %+v", ev)
		}
		for _, id := range d.IDs() {
			if seen[id] {
				t.Fatalf("message %s discarded twice", id)
			}
			seen[id] = true
		}
	}
	return seen
}

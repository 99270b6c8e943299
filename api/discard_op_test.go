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
	if len(audit.Items) != 45 {
		t.Fatalf("%d message.discard events, want one per message (45)", len(audit.Items))
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

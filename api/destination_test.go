package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// Destination queues of the matrix, by the test's owner rules: payments'
// (the scoped tokens' own team), orders' (another team's), and one no
// rule gives to a team.
const (
	destOwn     = "payments.retry"
	destOther   = "orders.retry"
	destUnowned = "nobody.retry"
)

// destinationAllowed is the rule under test, written out as a table:
// viewers never create; an admin without owners sends anywhere; without
// a destination queue every message goes back to its own queue; a token
// with owners (operator or admin) names only its owners' queues; an
// operator without owners names any queue a team owns.
func destinationAllowed(role quarantine.Role, scoped bool, queue string) bool {
	switch {
	case !role.AtLeast(quarantine.RoleOperator):
		return false
	case queue == "", role == quarantine.RoleAdmin && !scoped:
		return true
	case scoped:
		return queue == destOwn
	default:
		return queue != destUnowned
	}
}

// TestReplayDestinationMatrix creates a replay of a payments message as
// every role, with and without owners, to no destination queue, its own
// team's, another team's and an unowned one, with and without a
// destination collector, selected by ids and by filter. A refused
// destination is 403 naming /destination, recorded as access.denied with
// the destination, and creates nothing: no batch, the message still
// quarantined.
func TestReplayDestinationMatrix(t *testing.T) {
	t.Parallel()
	e := newReplayEnv(t)
	for _, role := range []quarantine.Role{quarantine.RoleViewer, quarantine.RoleOperator, quarantine.RoleAdmin} {
		for _, scoped := range []bool{false, true} {
			for _, queue := range []string{"", destOwn, destOther, destUnowned} {
				for _, collector := range []string{"", "orders-rmq"} {
					for _, byFilter := range []bool{false, true} {
						name := fmt.Sprintf("%s/scoped=%v/queue=%q/collector=%q/filter=%v", role, scoped, queue, collector, byFilter)
						t.Run(name, func(t *testing.T) {
							t.Parallel()
							e := e.forT(t)
							job := "job-" + quarantine.NewID(time.Now())
							id := e.ingestOne("billing", job, `{"n":1}`)
							tok := "d-" + id
							var secret string
							if scoped {
								secret = e.token(tok, role, "payments")
							} else {
								secret = e.token(tok, role)
							}
							body := map[string]any{"reason": id}
							if byFilter {
								body["filter"] = map[string]any{"job_name": []string{job}}
							} else {
								body["ids"] = []string{id}
							}
							dst := map[string]any{}
							if queue != "" {
								dst["queue"] = queue
							}
							if collector != "" {
								dst["collector"] = collector
							}
							if len(dst) > 0 {
								body["destination"] = dst
							}
							r := e.json(http.MethodPost, "/api/v1/replays", secret, body)
							if destinationAllowed(role, scoped, queue) {
								var c replayCreated
								r.want(t, http.StatusCreated).decode(t, &c)
								want := quarantine.ReplayDestination{Queue: queue, Collector: collector}
								if c.Replay.Destination != want || c.Replay.Counts[quarantine.ItemPending] != 1 {
									t.Fatalf("batch %+v, want destination %+v and 1 pending item", c.Replay, want)
								}
								if den := e.deniedTo(tok); len(den) != 0 {
									t.Fatalf("an allowed replay recorded %+v", den)
								}
								return
							}
							field := "/destination"
							if !role.AtLeast(quarantine.RoleOperator) {
								field = "" // the route's role, before the body
							}
							r.problem(t, http.StatusForbidden, field)
							den := e.deniedTo(tok)
							if len(den) != 1 {
								t.Fatalf("access.denied events %+v, want 1", den)
							}
							if field != "" {
								var d struct {
									Destination quarantine.ReplayDestination `json:"destination"`
									Path        string                       `json:"path"`
								}
								if err := json.Unmarshal(den[0].Details, &d); err != nil || d.Destination.Queue != queue ||
									d.Destination.Collector != collector || d.Path != "/api/v1/replays" {
									t.Fatalf("access.denied details %s (%v)", den[0].Details, err)
								}
							}
							if m := e.message(id, e.admin); m.Status != quarantine.StatusQuarantined || m.ReplayCount != 0 {
								t.Fatalf("a refused replay changed the message: %s, %d replays", m.Status, m.ReplayCount)
							}
							if batchesHold(t, e.get("/api/v1/replays?limit=1000", e.admin).want(t, http.StatusOK), id) {
								t.Fatal("a refused replay created a batch")
							}
						})
					}
				}
			}
		}
	}
}

// TestReplayDestinationCheckedOnStart: a token that may act on a batch's
// messages but not publish to its destination may not start or resume
// it, whoever created it (403 naming /destination, audited; the batch
// unchanged); one allowed the destination may.
func TestReplayDestinationCheckedOnStart(t *testing.T) {
	t.Parallel()
	e := newReplayEnv(t)
	scoped := e.token("payments-op", quarantine.RoleOperator, "payments")
	id := e.ingestOne("billing", "charge", `1`)
	draft := e.createReplay(e.admin, map[string]any{"ids": []string{id}, "reason": "to orders", "dry_run": true,
		"destination": map[string]any{"queue": destOther}}).Replay.ID
	e.json(http.MethodPost, "/api/v1/replays/"+draft+"/start", scoped, map[string]any{"reason": "go"}).
		problem(t, http.StatusForbidden, "/destination")
	if b := e.replay(draft, e.admin); b.State != quarantine.ReplayDraft {
		t.Fatalf("a refused start left the batch %s", b.State)
	}
	if den := e.deniedTo("payments-op"); len(den) != 1 || den[0].Subject != "/api/v1/replays/"+draft+"/start" {
		t.Fatalf("access.denied events %+v", den)
	}
	// The operator without owners acts for every team.
	e.act(draft, "start", e.operator, "go", http.StatusOK)
	e.act(draft, "pause", scoped, "hold", http.StatusOK) // pausing publishes nothing
	e.json(http.MethodPost, "/api/v1/replays/"+draft+"/resume", scoped, map[string]any{"reason": "go on"}).
		problem(t, http.StatusForbidden, "/destination")
	if b := e.replay(draft, e.admin); b.State != quarantine.ReplayPaused {
		t.Fatalf("a refused resume left the batch %s", b.State)
	}
	e.act(draft, "resume", e.operator, "go on", http.StatusOK)
}

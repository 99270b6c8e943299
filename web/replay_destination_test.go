package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/rules"
	"github.com/quarantine-dev/quarantine/web"
)

// TestReplayFormDestination posts the replay form of a payments message
// as an operator and an admin, with and without owners, to no
// destination queue, its own team's, another team's and an unowned one,
// selected by ids and by filter: the UI applies the API's rule
// (rules.ReplayDefaults.DestinationAllowed). A refused destination is 403
// with the error at the queue field, recorded as access.denied with the
// destination, and creates nothing.
func TestReplayFormDestination(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *web.Config) {
		c.Owners = []quarantine.OwnerRule{
			{Team: "payments", Queues: []string{"payments.*", "billing"}},
			{Team: "orders", Queues: []string{"orders.*"}},
		}
		c.Replay = rules.ReplayDefaults{Rate: 5, MaxRate: 100, Collectors: []string{"orders-rmq"}}
	})
	m := e.message(quarantine.Message{Queue: "billing", Owner: "payments", JobName: "charge", IdempotencyKey: "k1", Payload: []byte(`{}`)})
	re := &replayEnv{env: e}
	batches := func() int {
		list, _, err := e.store.ListReplays(context.Background(), quarantine.ReplayFilter{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		return len(list)
	}
	n := 0
	for _, role := range []quarantine.Role{quarantine.RoleOperator, quarantine.RoleAdmin} {
		for _, scoped := range []bool{false, true} {
			for _, queue := range []string{"", "payments.retry", "orders.retry", "nobody.retry"} {
				for _, query := range []string{"ids=" + m.ID, "queue=billing"} {
					n++
					name := fmt.Sprintf("ui-%d", n)
					allowed := queue == "" || (role == quarantine.RoleAdmin && !scoped) ||
						(scoped && queue == "payments.retry") || (!scoped && queue != "nobody.retry")
					t.Run(fmt.Sprintf("%s/scoped=%v/queue=%q/%s", role, scoped, queue, query), func(t *testing.T) {
						re.env.t = t
						var secret string
						if scoped {
							secret = e.token(name, role, "payments")
						} else {
							secret = e.token(name, role)
						}
						re.c = e.client()
						e.login(re.c, secret)
						_, v := re.newForm(re.c, query)
						v.Set("dest_queue", queue)
						v.Set("dest_collector", "orders-rmq")
						before := batches()
						if allowed {
							if b := re.dryRun(v); b.Destination != (quarantine.ReplayDestination{Queue: queue, Collector: "orders-rmq"}) {
								t.Fatalf("destination %+v", b.Destination)
							}
							return
						}
						res, page := postForm(t, re.c, e.srv.URL+"/replays", v)
						if res.StatusCode != http.StatusForbidden || !strings.Contains(page, `id="dest_queue-error"`) ||
							!strings.Contains(page, `aria-describedby="dest_queue-error"`) {
							t.Fatalf("refused destination: %d\n%s", res.StatusCode, page)
						}
						if got := batches(); got != before {
							t.Fatalf("a refused form created %d batches", got-before)
						}
						evs, err := e.store.ListAudit(context.Background(), quarantine.AuditFilter{Action: quarantine.ActionAccessDenied, Actor: "token:" + name})
						if err != nil {
							t.Fatal(err)
						}
						var d struct{ Destination quarantine.ReplayDestination }
						if len(evs) != 1 || json.Unmarshal(evs[0].Details, &d) != nil || d.Destination.Queue != queue {
							t.Fatalf("access.denied events %+v", evs)
						}
					})
				}
			}
		}
	}
}

// TestReplayStartDestination: a token that acts on a draft's messages but
// may not publish to its destination is not offered Start, and a start
// it posts anyway is 403, audited, and leaves the draft.
func TestReplayStartDestination(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *web.Config) {
		c.Owners = []quarantine.OwnerRule{{Team: "payments", Queues: []string{"billing"}}, {Team: "orders", Queues: []string{"orders.*"}}}
		c.Replay = rules.ReplayDefaults{Rate: 5, MaxRate: 100}
	})
	m := e.message(quarantine.Message{Queue: "billing", Owner: "payments", JobName: "charge", IdempotencyKey: "k1", Payload: []byte(`{}`)})
	admin := &replayEnv{env: e, c: e.client()}
	e.login(admin.c, e.token("admin", quarantine.RoleAdmin))
	_, v := admin.newForm(admin.c, "ids="+m.ID)
	v.Set("dest_queue", "orders.retry")
	b := admin.dryRun(v)

	c := e.client()
	e.login(c, e.token("payments-op", quarantine.RoleOperator, "payments"))
	_, page := get(t, c, e.srv.URL+"/replays/"+b.ID)
	if strings.Contains(page, `id="start"`) || !strings.Contains(page, `id="cancel"`) {
		t.Fatalf("the draft offers start to a token that may not publish to orders.retry:\n%s", page)
	}
	res, body := postForm(t, c, e.srv.URL+"/replays/"+b.ID+"/start", url.Values{"csrf": {csrf(t, page)}, "reason": {"go"}})
	if res.StatusCode != http.StatusForbidden || !strings.Contains(body, "orders.retry") {
		t.Fatalf("start: %d\n%s", res.StatusCode, body)
	}
	if got := admin.replay(b.ID).State; got != quarantine.ReplayDraft {
		t.Fatalf("a refused start left the draft %s", got)
	}
	evs, err := e.store.ListAudit(context.Background(), quarantine.AuditFilter{Action: quarantine.ActionAccessDenied, Actor: "token:payments-op"})
	if err != nil || len(evs) != 1 {
		t.Fatalf("access.denied events %+v (%v)", evs, err)
	}
}

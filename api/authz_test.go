package api_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// forT returns a copy of e whose helpers report to t, for subtests.
func (e *env) forT(t *testing.T) *env {
	c := *e
	c.t = t
	return &c
}

// target is the message a matrix case works on; its job name is unique
// to the case, so that filters on it select this message alone.
type target struct{ id, queue, job string }

// authzRoute is one route of the matrix: how it is called on a message
// of a queue, and who may call it.
type authzRoute struct {
	name string
	// rule: read (any role; a message outside the owners is 404), list
	// (any role; outside messages are left out), operate (operator+; an
	// outside message is 404 and audited), bulk (operator+; outside ids are
	// skipped and audited), ingest (operator+; an outside queue is 403),
	// audit (a token without owners, or an admin), admin (admins only).
	rule string
	call func(e *env, secret string, m target) *resp
	// sees reports, for a 200 of a list rule, whether the message was in it.
	sees func(t *testing.T, r *resp, id string) bool
}

func itemsHold(t *testing.T, r *resp, id string) bool {
	var body struct {
		Items []struct {
			ID        string `json:"id"`
			ExampleID string `json:"example_id"`
			OldestID  string `json:"oldest_id"`
			Queue     string `json:"queue"`
		} `json:"items"`
	}
	r.decode(t, &body)
	for _, it := range body.Items {
		if it.ID == id || it.ExampleID == id || it.OldestID == id {
			return true
		}
	}
	return false
}

// matrixReplay creates, as the admin, a batch of m alone (a draft, or
// running) whose reason is m's id, and returns its id.
func (e *env) matrixReplay(m target, draft bool) string {
	e.t.Helper()
	return e.createReplay(e.admin, map[string]any{"ids": []string{m.id}, "reason": m.id, "dry_run": draft}).Replay.ID
}

// matrixDiscard discards, as the admin, m alone by a filter confined to
// m's owner, and returns the operation's id.
func (e *env) matrixDiscard(m target) string {
	e.t.Helper()
	msg := e.message(m.id, e.admin)
	var ans discardAnswer
	e.json(http.MethodPost, "/api/v1/messages/discard", e.admin, map[string]any{"reason": "matrix",
		"filter": map[string]any{"job_name": []string{m.job}, "owner": []string{msg.Owner}}}).want(e.t, http.StatusOK).decode(e.t, &ans)
	return ans.Operation.ID
}

// matrixRunningDiscard records, as the admin, a discard of m alone by a
// filter confined to m's owner that no process runs (left by one that
// died), and returns its id.
func (e *env) matrixRunningDiscard(m target) string {
	e.t.Helper()
	msg := e.message(m.id, e.admin)
	op, err := e.store.StartDiscard(context.Background(), quarantine.Discard{Reason: "matrix", Actor: "token:admin",
		Filter: &quarantine.Filter{JobName: []string{m.job}, Owner: []string{msg.Owner}}}, -1)
	if err != nil {
		e.t.Fatal(err)
	}
	return op.ID
}

// batchesHold reports whether a replay list holds the batch of the
// message id (see matrixReplay).
func batchesHold(t *testing.T, r *resp, id string) bool {
	var body struct {
		Items []struct {
			Reason string `json:"reason"`
		} `json:"items"`
	}
	r.decode(t, &body)
	for _, it := range body.Items {
		if it.Reason == id {
			return true
		}
	}
	return false
}

var authzRoutes = []authzRoute{
	{"get message", "read", func(e *env, s string, m target) *resp { return e.get("/api/v1/messages/"+m.id, s) }, nil},
	{"list versions", "read", func(e *env, s string, m target) *resp { return e.get("/api/v1/messages/"+m.id+"/versions", s) }, nil},
	{"get version", "read", func(e *env, s string, m target) *resp { return e.get("/api/v1/messages/"+m.id+"/versions/1", s) }, nil},
	{"list messages", "list", func(e *env, s string, m target) *resp { return e.get("/api/v1/messages?job_name="+m.job, s) }, itemsHold},
	{"sample", "list", func(e *env, s string, m target) *resp {
		return e.json(http.MethodPost, "/api/v1/messages/sample", s, map[string]any{"filter": map[string]any{"job_name": []string{m.job}}})
	}, itemsHold},
	{"groups", "list", func(e *env, s string, m target) *resp { return e.get("/api/v1/groups?job_name="+m.job, s) }, itemsHold},
	{"queues", "list", func(e *env, s string, m target) *resp { return e.get("/api/v1/queues?job_name="+m.job, s) }, itemsHold},
	{"edit", "operate", func(e *env, s string, m target) *resp {
		cur, err := e.store.GetMessage(context.Background(), m.id)
		if err != nil {
			e.t.Fatal(err)
		}
		return e.edit(m.id, s, cur.PayloadSHA256, map[string]any{"payload": map[string]any{"fixed": true}, "reason": "matrix"})
	}, nil},
	{"discard", "operate", func(e *env, s string, m target) *resp {
		return e.json(http.MethodPost, "/api/v1/messages/"+m.id+"/discard", s, map[string]any{"reason": "matrix"})
	}, nil},
	{"bulk discard", "bulk", func(e *env, s string, m target) *resp {
		return e.json(http.MethodPost, "/api/v1/messages/discard", s, map[string]any{"ids": []string{m.id}, "reason": "matrix"})
	}, nil},
	{"get discard", "read", func(e *env, s string, m target) *resp {
		return e.get("/api/v1/discards/"+e.matrixDiscard(m), s)
	}, nil},
	{"resume discard", "operate", func(e *env, s string, m target) *resp {
		return e.json(http.MethodPost, "/api/v1/discards/"+e.matrixRunningDiscard(m)+"/resume", s, nil)
	}, nil},
	{"rekey", "filter", func(e *env, s string, m target) *resp {
		return e.json(http.MethodPost, "/api/v1/messages/rekey", s, map[string]any{"filter": map[string]any{"queue": []string{m.queue}}, "dry_run": true})
	}, nil},
	{"ingest", "ingest", func(e *env, s string, m target) *resp {
		return e.ingest(s, envelopeJSON(m.queue, m.job+"-ingest", 1, baseTime))
	}, nil},
	{"create replay", "bulk", func(e *env, s string, m target) *resp {
		return e.json(http.MethodPost, "/api/v1/replays", s, map[string]any{"ids": []string{m.id}, "reason": "matrix", "dry_run": true})
	}, nil},
	{"list replays", "list", func(e *env, s string, m target) *resp {
		e.matrixReplay(m, false)
		return e.get("/api/v1/replays?limit=1000", s)
	}, batchesHold},
	{"get replay", "read", func(e *env, s string, m target) *resp { return e.get("/api/v1/replays/"+e.matrixReplay(m, true), s) }, nil},
	{"replay items", "read", func(e *env, s string, m target) *resp {
		return e.get("/api/v1/replays/"+e.matrixReplay(m, true)+"/items", s)
	}, nil},
	{"replay report", "read", func(e *env, s string, m target) *resp {
		return e.get("/api/v1/replays/"+e.matrixReplay(m, true)+"/report", s)
	}, nil},
	{"start replay", "operate", func(e *env, s string, m target) *resp {
		return e.json(http.MethodPost, "/api/v1/replays/"+e.matrixReplay(m, true)+"/start", s, map[string]any{"reason": "matrix"})
	}, nil},
	{"pause replay", "operate", func(e *env, s string, m target) *resp {
		return e.json(http.MethodPost, "/api/v1/replays/"+e.matrixReplay(m, false)+"/pause", s, map[string]any{"reason": "matrix"})
	}, nil},
	{"resume replay", "operate", func(e *env, s string, m target) *resp {
		id := e.matrixReplay(m, false)
		e.act(id, "pause", e.admin, "matrix", http.StatusOK)
		return e.json(http.MethodPost, "/api/v1/replays/"+id+"/resume", s, map[string]any{"reason": "matrix"})
	}, nil},
	{"cancel replay", "operate", func(e *env, s string, m target) *resp {
		return e.json(http.MethodPost, "/api/v1/replays/"+e.matrixReplay(m, true)+"/cancel", s, map[string]any{"reason": "matrix"})
	}, nil},
	// Alarms concern queues, not one message: every role lists them (a
	// scoped token only its owners' queues, checked in TestAlarmsList).
	{"list alarms", "list", func(e *env, s string, m target) *resp { return e.get("/api/v1/alarms", s) }, nil},
	{"audit list", "audit", func(e *env, s string, m target) *resp { return e.get("/api/v1/audit", s) }, nil},
	{"audit export", "audit", func(e *env, s string, m target) *resp { return e.get("/api/v1/audit/export", s) }, nil},
	{"audit verify", "audit", func(e *env, s string, m target) *resp { return e.get("/api/v1/audit/verify", s) }, nil},
	{"list tokens", "admin", func(e *env, s string, m target) *resp { return e.get("/api/v1/tokens", s) }, nil},
	{"create token", "admin", func(e *env, s string, m target) *resp {
		return e.json(http.MethodPost, "/api/v1/tokens", s, map[string]any{"name": "new-" + m.id, "role": "viewer"})
	}, nil},
	{"revoke token", "admin", func(e *env, s string, m target) *resp {
		_, hash := quarantine.NewTokenSecret()
		victim := &quarantine.Token{Name: "victim-" + m.id, Role: quarantine.RoleViewer, SecretHash: hash}
		if err := e.store.CreateToken(context.Background(), victim, "test"); err != nil {
			e.t.Fatal(err)
		}
		return e.do(http.MethodDelete, "/api/v1/tokens/"+victim.ID, s, nil)
	}, nil},
}

// authzExpect is what a route answers a role, scoped to team payments or
// not, on a message of payments (own) or of orders (foreign): the status,
// and whether an access.denied event is recorded.
func authzExpect(rule string, role quarantine.Role, scoped, foreign bool) (int, bool) {
	hidden := scoped && foreign
	operator := role.AtLeast(quarantine.RoleOperator)
	switch rule {
	case "read":
		if hidden {
			return http.StatusNotFound, false
		}
	case "operate":
		switch {
		case !operator:
			return http.StatusForbidden, true
		case hidden:
			return http.StatusNotFound, true
		}
	case "bulk":
		if !operator {
			return http.StatusForbidden, true
		}
		return http.StatusOK, hidden
	case "filter": // a filter is narrowed to the token's owners: nothing to deny
		if !operator {
			return http.StatusForbidden, true
		}
	case "ingest":
		if !operator || hidden {
			return http.StatusForbidden, true
		}
	case "audit":
		if scoped && role != quarantine.RoleAdmin {
			return http.StatusForbidden, true
		}
	case "admin":
		if role != quarantine.RoleAdmin {
			return http.StatusForbidden, true
		}
	}
	return http.StatusOK, false
}

// TestAuthorizationMatrix calls every route of the API as every role,
// with and without owners, on a message of the token's own team and of
// another, and checks the status and that every denial is audited.
func TestAuthorizationMatrix(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if n := apiRoutes(t); len(authzRoutes) != n {
		t.Fatalf("the matrix covers %d routes, the spec has %d under /api", len(authzRoutes), n)
	}
	for _, rt := range authzRoutes {
		for _, role := range []quarantine.Role{quarantine.RoleViewer, quarantine.RoleOperator, quarantine.RoleAdmin} {
			for _, scoped := range []bool{false, true} {
				for _, foreign := range []bool{false, true} {
					name := fmt.Sprintf("%s/%s/scoped=%v/foreign=%v", rt.name, role, scoped, foreign)
					t.Run(name, func(t *testing.T) {
						t.Parallel()
						e := e.forT(t)
						queue := "billing"
						if foreign {
							queue = "orders.x"
						}
						job := "job-" + quarantine.NewID(time.Now())
						id := e.ingestOne(queue, job, `{"n":1}`)
						m := target{id: id, queue: queue, job: job}
						tokName := "m-" + id
						var secret string
						if scoped {
							secret = e.token(tokName, role, "payments")
						} else {
							secret = e.token(tokName, role)
						}
						status, denied := authzExpect(rt.rule, role, scoped, foreign)
						r := rt.call(e, secret, m)
						if (rt.name == "create token" || rt.name == "create replay") && status == http.StatusOK {
							status = http.StatusCreated
						}
						if status >= 400 {
							field := ""
							if status == http.StatusNotFound {
								field = "id"
							}
							r.problem(t, status, field)
						} else {
							r.want(t, status)
						}
						if got := len(e.deniedTo(tokName)) > 0; got != denied {
							t.Fatalf("denial audited: %v, want %v", got, denied)
						}
						if rt.sees != nil && status == http.StatusOK {
							if got := rt.sees(t, r, id); got == (scoped && foreign) {
								t.Fatalf("the answer holds the message: %v, want %v", got, !(scoped && foreign))
							}
						}
						if rt.name == "bulk discard" && status == http.StatusOK {
							var res struct{ Changed []string }
							r.decode(t, &res)
							if slices.Contains(res.Changed, id) == (scoped && foreign) {
								t.Fatalf("changed %v", res.Changed)
							}
						}
					})
				}
			}
		}
	}
}

// apiRoutes counts the operations of the spec under /api/.
func apiRoutes(t *testing.T) int {
	doc, _ := loadSpec(t)
	n := 0
	for path, item := range doc.Paths.Map() {
		if strings.HasPrefix(path, "/api/") {
			n += len(item.Operations())
		}
	}
	return n
}

package api_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/quarantine-dev/quarantine"
)

type bulkJSON struct {
	Matched int      `json:"matched"`
	Changed []string `json:"changed"`
	Skipped []struct {
		ID     string `json:"id"`
		Reason string `json:"reason"`
	} `json:"skipped"`
}

func (e *env) discardMany(secret string, body any) bulkJSON {
	e.t.Helper()
	var b bulkJSON
	e.json(http.MethodPost, "/api/v1/messages/discard", secret, body).want(e.t, http.StatusOK).decode(e.t, &b)
	return b
}

func TestDiscardOne(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.ingestOne("billing", "charge", `{"a":1}`)
	r := e.json(http.MethodPost, "/api/v1/messages/"+id+"/discard", e.operator, map[string]any{"reason": "duplicate of 42"}).want(t, http.StatusOK)
	var m message
	r.decode(t, &m)
	if m.Status != quarantine.StatusDiscarded || r.header.Get("ETag") != `"`+m.PayloadSHA256+`"` || string(m.payloadBytes(t)) != `{"a":1}` {
		t.Fatalf("discarded %+v", m.Message)
	}
	// Nothing is deleted; a second discard is a conflict.
	if got := e.message(id, e.viewer); got.Status != quarantine.StatusDiscarded {
		t.Fatalf("status %s", got.Status)
	}
	e.json(http.MethodPost, "/api/v1/messages/"+id+"/discard", e.operator, map[string]any{"reason": "again"}).problem(t, http.StatusConflict, "")
	// And a discarded message cannot be edited.
	e.edit(id, e.operator, m.PayloadSHA256, map[string]any{"payload": 1, "reason": "x"}).problem(t, http.StatusConflict, "")
	var audit struct{ Items []auditEvent }
	e.get("/api/v1/audit?action=message.discard&message="+id, e.admin).want(t, http.StatusOK).decode(t, &audit)
	var d map[string]any
	if len(audit.Items) != 1 || json.Unmarshal(audit.Items[0].Details, &d) != nil || d["reason"] != "duplicate of 42" || audit.Items[0].Actor != "token:operator" {
		t.Fatalf("audit %+v", audit.Items)
	}
}

func TestDiscardBulk(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seedSet(e) // 45 in billing, 5 in orders.x
	a, b := e.ingestOne("billing", "x", `1`), e.ingestOne("orders.x", "x", `2`)
	unknown := quarantine.NewID(baseTime)
	res := e.discardMany(e.operator, map[string]any{"ids": []string{a, a, unknown}, "reason": "by id"})
	if !slices.Equal(res.Changed, []string{a}) || len(res.Skipped) != 1 || res.Skipped[0].ID != unknown || res.Skipped[0].Reason != "not found" {
		t.Fatalf("by ids: %+v", res)
	}
	// A filter pinned to a count that is not the filter's changes nothing.
	filter := map[string]any{"queue": []string{"orders.x"}, "status": []string{"quarantined"}}
	e.json(http.MethodPost, "/api/v1/messages/discard", e.operator, map[string]any{"filter": filter, "expect_count": 5, "reason": "r"}).
		problem(t, http.StatusConflict, "/expect_count")
	if n := e.count(e.viewer, "&status=discarded"); n != 1 {
		t.Fatalf("%d discarded after a refused bulk discard", n)
	}
	res = e.discardMany(e.operator, map[string]any{"filter": filter, "expect_count": 6, "reason": "r"})
	if res.Matched != 6 || len(res.Changed) != 6 || !slices.Contains(res.Changed, b) {
		t.Fatalf("by filter: %+v", res)
	}
	// An operator of payments: ids of orders are skipped as not found and audited.
	c := e.ingestOne("orders.x", "x", `3`)
	d := e.ingestOne("billing", "x", `4`)
	ops := e.token("payments-ops", quarantine.RoleOperator, "payments")
	res = e.discardMany(ops, map[string]any{"ids": []string{c, d}, "reason": "scoped"})
	if !slices.Equal(res.Changed, []string{d}) || len(res.Skipped) != 1 || res.Skipped[0].ID != c || res.Skipped[0].Reason != "not found" {
		t.Fatalf("scoped by ids: %+v", res)
	}
	if den := e.deniedTo("payments-ops"); len(den) != 1 {
		t.Fatalf("denials %+v", den)
	}
	// A filter of a scoped operator reaches only its owners' messages.
	res = e.discardMany(ops, map[string]any{"filter": map[string]any{"status": []string{"quarantined"}}, "reason": "scoped"})
	if len(res.Changed) != 45 {
		t.Fatalf("scoped filter discarded %d, want billing's 45", len(res.Changed))
	}
	if n := e.count(e.viewer, "&queue=orders.x&status=quarantined"); n != 1 {
		t.Fatalf("orders.x quarantined %d, want 1 (c)", n)
	}
	// Asking for another team only: nothing matches.
	e.json(http.MethodPost, "/api/v1/messages/discard", ops, map[string]any{"filter": map[string]any{"owner": []string{"orders"}}, "expect_count": 1, "reason": "r"}).
		problem(t, http.StatusConflict, "/expect_count")
}

func TestDiscardRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.ingestOne("billing", "charge", `{"a":1}`)
	for _, tc := range []struct {
		target string
		body   string
		status int
		field  string
	}{
		{"/api/v1/messages/" + id + "/discard", `{}`, 422, "/reason"},
		{"/api/v1/messages/" + id + "/discard", `{"reason":""}`, 422, "/reason"},
		{"/api/v1/messages/" + id + "/discard", `{"reason":"x","force":true}`, 400, "/force"},
		{"/api/v1/messages/" + id + "/discard", ``, 400, ""},
		{"/api/v1/messages/nope/discard", `{"reason":"x"}`, 404, "id"},
		{"/api/v1/messages/discard", `{"reason":"x"}`, 400, "/ids"},
		{"/api/v1/messages/discard", `{"reason":"x","ids":[]}`, 400, "/ids"},
		{"/api/v1/messages/discard", `{"ids":["` + id + `"]}`, 422, "/reason"},
		{"/api/v1/messages/discard", `{"reason":"x","ids":["` + id + `","nope"]}`, 400, "/ids/1"},
		{"/api/v1/messages/discard", `{"reason":"x","ids":"` + id + `"}`, 400, "/ids"},
		{"/api/v1/messages/discard", `{"reason":"x","ids":["` + id + `"],"filter":{"queue":["a"]}}`, 400, "/filter"},
		{"/api/v1/messages/discard", `{"reason":"x","filter":{}}`, 400, "/filter"},
		{"/api/v1/messages/discard", `{"reason":"x","filter":{"qeue":["a"]}}`, 400, "/filter/qeue"},
		{"/api/v1/messages/discard", `{"reason":"x","filter":{"status":["gone"]}}`, 400, "/filter/status/0"},
		{"/api/v1/messages/discard", `{"reason":"x","filter":{"older_than":"soon"}}`, 400, "/filter/older_than"},
		{"/api/v1/messages/discard", `{"reason":"x","filter":[]}`, 400, "/filter"},
		{"/api/v1/messages/discard", `{"reason":"x","filter":{"queue":["a"]},"expect_count":-1}`, 400, "/expect_count"},
		{"/api/v1/messages/discard", `{"reason":"x","filter":{"queue":["a"]},"expect_count":1.5}`, 400, "/expect_count"},
	} {
		e.json(http.MethodPost, tc.target, e.operator, []byte(tc.body)).problem(t, tc.status, tc.field)
	}
	if m := e.message(id, e.viewer); m.Status != quarantine.StatusQuarantined {
		t.Fatalf("a refused discard changed the status to %s", m.Status)
	}
}

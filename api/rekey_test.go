package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/api"
	"github.com/quarantine-dev/quarantine/collect"
)

type rekeyJSON = quarantine.RekeyResult

// ingestWithHeaders stores one message of queue without an envelope key,
// carrying headers, and returns its id.
func (e *env) ingestWithHeaders(queue string, n int, headers map[string]string) string {
	e.t.Helper()
	b, _ := json.Marshal(map[string]any{"envelope": "quarantine.failure/v1",
		"job":     map[string]any{"name": "charge", "queue": queue, "headers": headers, "payload": map[string]int{"n": n}},
		"failure": map[string]any{"class": "permanent", "reason": "bad"}})
	return e.ingestOK(e.admin, b).Items[0].ID
}

// Messages collected before a rule existed get their key from a re-key:
// the dry run counts, the apply changes exactly those and audits old and
// new keys, and a replay no longer skips them.
func TestRekeyAppliesTheRulesOfNow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var ids []string
	for i := range 3 {
		ids = append(ids, e.ingestWithHeaders("orders.eu", i, map[string]string{"X-Job-Key": fmt.Sprint("job-", i)}))
	}
	usual := e.ingestWithHeaders("orders.eu", 9, map[string]string{"Idempotency-Key": "usual-9"})
	none := e.ingestWithHeaders("orders.eu", 10, map[string]string{"x-trace": "t"})
	enveloped := e.ingestOne("orders.eu", "charge", `{"n":11}`)
	e.ingestWithHeaders("billing", 12, map[string]string{"X-Job-Key": "other-queue"})
	if m := e.message(ids[0], e.viewer); m.IdempotencyKey != "" || !m.HasFlag(quarantine.FlagMissingIdempotencyKey) {
		t.Fatalf("before any rule: key %q flags %v", m.IdempotencyKey, m.Flags)
	}
	if m := e.message(usual, e.viewer); m.IdempotencyKey != "usual-9" || m.KeyRule != quarantine.KeyRuleDefault {
		t.Fatalf("usual header: key %q rule %q", m.IdempotencyKey, m.KeyRule)
	}

	// The operator adds a rule and restarts: a second server on the same store.
	cfg := apiConfig(e)
	cfg.Preparer = &collect.Preparer{Idempotency: []collect.IdempotencyRule{{Queues: []string{"orders.*"}, Header: "x-job-key"}}}
	srv := httptest.NewServer(api.New(cfg).Handler())
	t.Cleanup(srv.Close)
	e2 := *e
	e2.srv = srv
	filter := map[string]any{"queue": []string{"orders.eu"}}

	var dry rekeyJSON
	e2.json(http.MethodPost, "/api/v1/messages/rekey", e.operator, map[string]any{"filter": filter, "dry_run": true}).
		want(t, http.StatusOK).decode(t, &dry)
	// 3 get a key; usual-9 keeps its key but the rule recorded changes
	// (default-headers -> header:x-job-key), and the rule finds none: unchanged.
	if !dry.DryRun || dry.Matched != 6 || dry.Changed != 3 || dry.Unchanged != 2 || dry.StillMissing != 1 || len(dry.Changes) != 3 {
		t.Fatalf("dry run %+v", dry)
	}
	if m := e.message(ids[0], e.viewer); m.IdempotencyKey != "" {
		t.Fatalf("a dry run changed a key: %q", m.IdempotencyKey)
	}
	e2.json(http.MethodPost, "/api/v1/messages/rekey", e.viewer, map[string]any{"filter": filter, "reason": "x"}).want(t, http.StatusForbidden)
	e2.json(http.MethodPost, "/api/v1/messages/rekey", e.operator, map[string]any{"filter": filter}).problem(t, http.StatusUnprocessableEntity, "/reason")
	e2.json(http.MethodPost, "/api/v1/messages/rekey", e.operator, map[string]any{"filter": map[string]any{}, "reason": "x"}).problem(t, http.StatusBadRequest, "/filter")
	e2.json(http.MethodPost, "/api/v1/messages/rekey", e.operator, map[string]any{"filter": filter, "reason": "x", "expect_changed": 2}).
		problem(t, http.StatusConflict, "/expect_changed")
	if m := e.message(ids[1], e.viewer); m.IdempotencyKey != "" {
		t.Fatalf("a refused re-key changed a key: %q", m.IdempotencyKey)
	}

	var done rekeyJSON
	e2.json(http.MethodPost, "/api/v1/messages/rekey", e.operator, map[string]any{"filter": filter, "reason": "INC-7: rule for x-job-key", "expect_changed": 3}).
		want(t, http.StatusOK).decode(t, &done)
	if done.DryRun || done.Changed != 3 || done.Stale != 0 {
		t.Fatalf("apply %+v", done)
	}
	for i, id := range ids {
		m := e.message(id, e.viewer)
		if m.IdempotencyKey != fmt.Sprint("job-", i) || m.KeyRule != "header:x-job-key" || m.HasFlag(quarantine.FlagMissingIdempotencyKey) {
			t.Errorf("message %d: key %q rule %q flags %v", i, m.IdempotencyKey, m.KeyRule, m.Flags)
		}
	}
	if m := e.message(none, e.viewer); m.IdempotencyKey != "" || !m.HasFlag(quarantine.FlagMissingIdempotencyKey) {
		t.Errorf("still missing: key %q flags %v", m.IdempotencyKey, m.Flags)
	}
	if m := e.message(enveloped, e.viewer); m.KeyRule != quarantine.KeyRuleEnvelope {
		t.Errorf("an envelope key is the message's own: rule %q", m.KeyRule)
	}
	var audit struct{ Items []auditEvent }
	e.get("/api/v1/audit?action=message.rekey&message="+ids[2], e.admin).want(t, http.StatusOK).decode(t, &audit)
	var d map[string]string
	if len(audit.Items) != 1 || json.Unmarshal(audit.Items[0].Details, &d) != nil || d["old_key"] != "" || d["new_key"] != "job-2" ||
		d["new_rule"] != "header:x-job-key" || d["reason"] != "INC-7: rule for x-job-key" || audit.Items[0].Actor != "token:operator" {
		t.Fatalf("audit %+v (%v)", audit.Items, d)
	}

	// A second re-key finds nothing more to do.
	var again rekeyJSON
	e2.json(http.MethodPost, "/api/v1/messages/rekey", e.operator, map[string]any{"filter": filter, "dry_run": true}).
		want(t, http.StatusOK).decode(t, &again)
	if again.Changed != 0 || again.Unchanged != 5 || again.StillMissing != 1 {
		t.Fatalf("second dry run %+v", again)
	}
	// A replay of them no longer skips them for a missing key.
	var preview struct {
		Replay struct {
			Counts map[string]int `json:"counts"`
		} `json:"replay"`
	}
	e2.json(http.MethodPost, "/api/v1/replays", e.operator, map[string]any{"ids": ids, "dry_run": true, "reason": "after re-key"}).
		want(t, http.StatusCreated).decode(t, &preview)
	if preview.Replay.Counts["pending"] != 3 || preview.Replay.Counts["skipped"] != 0 {
		t.Fatalf("replay preview counts %v", preview.Replay.Counts)
	}
}

// An owner-scoped token re-keys only its team's messages.
func TestRekeyStaysWithinTheTokensOwners(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withPreparer(&collect.Preparer{Owners: owners}))
	a := e.ingestWithHeaders("orders.eu", 1, map[string]string{"x-job-key": "a"})
	b := e.ingestWithHeaders("billing", 2, map[string]string{"x-job-key": "b"})
	cfg := apiConfig(e)
	cfg.Preparer = &collect.Preparer{Owners: owners, Idempotency: []collect.IdempotencyRule{{Queues: []string{"*"}, Header: "x-job-key"}}}
	srv := httptest.NewServer(api.New(cfg).Handler())
	t.Cleanup(srv.Close)
	e2 := *e
	e2.srv = srv
	orders := e.token("orders-op", quarantine.RoleOperator, "orders")
	var res rekeyJSON
	e2.json(http.MethodPost, "/api/v1/messages/rekey", orders, map[string]any{"filter": map[string]any{"status": []string{"quarantined"}}, "reason": "rule"}).
		want(t, http.StatusOK).decode(t, &res)
	if res.Matched != 1 || res.Changed != 1 {
		t.Fatalf("scoped re-key %+v", res)
	}
	if e.message(a, e.viewer).IdempotencyKey != "a" || e.message(b, e.viewer).IdempotencyKey != "" {
		t.Fatal("the re-key crossed the token's owners")
	}
}

package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/quarantine-dev/quarantine"
)

type tokenJSON struct {
	ID        string   `json:"id"`
	Name      string   `json:"name"`
	Role      string   `json:"role"`
	Owners    []string `json:"owners"`
	CreatedBy string   `json:"created_by"`
	RevokedAt *string  `json:"revoked_at"`
	Secret    string   `json:"secret"`
}

func TestTokensLifecycle(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.json(http.MethodPost, "/api/v1/tokens", e.admin, map[string]any{"name": "ci", "role": "operator", "owners": []string{"payments"}})
	r.want(t, http.StatusCreated)
	var created tokenJSON
	r.decode(t, &created)
	if !strings.HasPrefix(created.Secret, quarantine.TokenPrefix) || created.Role != "operator" || created.CreatedBy != "token:admin" ||
		r.header.Get("Location") != "/api/v1/tokens/"+created.ID || r.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("created %+v, headers %v", created, r.header)
	}
	// The new secret works, with its owners.
	if n := e.count(created.Secret, ""); n != 0 {
		t.Fatalf("count %d", n)
	}
	var list struct{ Items []tokenJSON }
	r = e.get("/api/v1/tokens", e.admin).want(t, http.StatusOK)
	r.decode(t, &list)
	if len(list.Items) != 4 || strings.Contains(string(r.body), created.Secret) || strings.Contains(string(r.body), "secret") {
		t.Fatalf("list %s", r.body)
	}
	// Revoke: the secret stops working at once.
	var revoked tokenJSON
	e.do(http.MethodDelete, "/api/v1/tokens/"+created.ID, e.admin, nil).want(t, http.StatusOK).decode(t, &revoked)
	if revoked.RevokedAt == nil || revoked.ID != created.ID {
		t.Fatalf("revoked %+v", revoked)
	}
	e.get("/api/v1/messages", created.Secret).problem(t, http.StatusUnauthorized, "")
	e.do(http.MethodDelete, "/api/v1/tokens/"+created.ID, e.admin, nil).problem(t, http.StatusConflict, "")
	e.do(http.MethodDelete, "/api/v1/tokens/"+quarantine.NewID(baseTime), e.admin, nil).problem(t, http.StatusNotFound, "id")
	e.do(http.MethodDelete, "/api/v1/tokens/nope", e.admin, nil).problem(t, http.StatusNotFound, "id")

	var audit struct{ Items []auditEvent }
	e.get("/api/v1/audit?actor=token:admin", e.admin).want(t, http.StatusOK).decode(t, &audit)
	if len(audit.Items) != 2 || audit.Items[0].Action != quarantine.ActionTokenCreate || audit.Items[1].Action != quarantine.ActionTokenRevoke {
		t.Fatalf("audit %+v", audit.Items)
	}
	// The name is free again once revoked; a live duplicate is 409.
	e.json(http.MethodPost, "/api/v1/tokens", e.admin, map[string]any{"name": "ci", "role": "viewer"}).want(t, http.StatusCreated)
	r = e.json(http.MethodPost, "/api/v1/tokens", e.admin, map[string]any{"name": "ci", "role": "viewer"}).want(t, http.StatusConflict)
	var p struct{ Type, Field string }
	if r.decode(t, &p); p.Type != "urn:quarantine:problem:conflict" || (p.Field != "" && p.Field != "/name") {
		t.Fatalf("duplicate name: %+v", p)
	}
}

func TestTokensRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, tc := range []struct {
		body  string
		field string
	}{
		{`{"role":"viewer"}`, "/name"},
		{`{"name":"  ","role":"viewer"}`, "/name"},
		{`{"name":"a\nb","role":"viewer"}`, "/name"},
		{`{"name":"` + strings.Repeat("n", 201) + `","role":"viewer"}`, "/name"},
		{`{"name":"x"}`, "/role"},
		{`{"name":"x","role":"root"}`, "/role"},
		{`{"name":"x","role":"viewer","owners":[""]}`, "/owners/0"},
		{`{"name":"x","role":"viewer","owners":"payments"}`, "/owners"},
		{`{"name":"x","role":"viewer","secret":"qt_mine"}`, "/secret"},
		{`{"name":1,"role":"viewer"}`, "/name"},
		{`null`, ""},
	} {
		e.json(http.MethodPost, "/api/v1/tokens", e.admin, []byte(tc.body)).problem(t, http.StatusBadRequest, tc.field)
	}
	var list struct{ Items []tokenJSON }
	e.get("/api/v1/tokens", e.admin).want(t, http.StatusOK).decode(t, &list)
	if len(list.Items) != 3 {
		t.Fatalf("a refused request created a token: %d", len(list.Items))
	}
}

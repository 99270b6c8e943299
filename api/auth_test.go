package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/quarantine-dev/quarantine"
)

type auditEvent struct {
	Seq     int64           `json:"seq"`
	Actor   string          `json:"actor"`
	Action  string          `json:"action"`
	Subject string          `json:"subject"`
	Details json.RawMessage `json:"details"`
	Hash    string          `json:"hash"`
}

// denials returns the access.denied events of the audit log.
func (e *env) denials() []auditEvent {
	e.t.Helper()
	r := e.get("/api/v1/audit?action=access.denied&limit=1000", e.admin)
	if r.status != http.StatusOK {
		e.t.Fatalf("audit: %d %s", r.status, r.body)
	}
	var page struct{ Items []auditEvent }
	r.decode(e.t, &page)
	return page.Items
}

func TestAuthRejectsBadCredentials(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	secret, hash := quarantine.NewTokenSecret()
	revoked := &quarantine.Token{Name: "gone", Role: quarantine.RoleAdmin, SecretHash: hash}
	ctx := context.Background()
	if err := e.store.CreateToken(ctx, revoked, "test"); err != nil {
		t.Fatal(err)
	}
	if err := e.store.RevokeToken(ctx, revoked.ID, "test"); err != nil {
		t.Fatal(err)
	}
	unknown, _ := quarantine.NewTokenSecret()
	cases := []struct{ name, header string }{
		{"no header", ""},
		{"basic scheme", "Basic " + e.admin},
		{"scheme only", "Bearer"},
		{"empty secret", "Bearer   "},
		{"two words", "Bearer " + e.admin + " extra"},
		{"unknown token", "Bearer " + unknown},
		{"revoked token", "Bearer " + secret},
		{"huge secret", "Bearer " + strings.Repeat("a", 5000)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, target := range []string{"/api/v1/messages", "/api/v1/audit"} {
				var hdr []string
				if tc.header != "" {
					hdr = []string{"Authorization", tc.header}
				}
				r := e.do(http.MethodGet, target, "", nil, hdr...)
				r.problem(t, http.StatusUnauthorized, "")
				if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
					t.Fatalf("WWW-Authenticate %q", r.header.Get("WWW-Authenticate"))
				}
			}
		})
	}
	// The scheme is case-insensitive.
	if r := e.do(http.MethodGet, "/api/v1/messages", "", nil, "Authorization", "bearer "+e.viewer); r.status != http.StatusOK {
		t.Fatalf("lowercase scheme: %d", r.status)
	}
}

func TestAuthViewerCannotIngest(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ingest(e.viewer, envelopeJSON("billing", "a", 1, baseTime)).problem(t, http.StatusForbidden, "")
	if n := e.count(e.admin, ""); n != 0 {
		t.Fatalf("%d messages stored by a viewer", n)
	}
	d := e.denials()
	if len(d) != 1 || d[0].Actor != "token:viewer" || d[0].Subject != "/api/v1/ingest" {
		t.Fatalf("denials %+v", d)
	}
	var details map[string]any
	if err := json.Unmarshal(d[0].Details, &details); err != nil {
		t.Fatal(err)
	}
	if details["method"] != "POST" || details["path"] != "/api/v1/ingest" || details["required_role"] != "operator" {
		t.Fatalf("details %v", details)
	}
}

func TestAuthOwnerScopedToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	res := e.ingestOK(e.admin, array(envelopeJSON("billing", "a", 1, baseTime), envelopeJSON("payments.eu", "b", 2, baseTime),
		envelopeJSON("orders.x", "c", 3, baseTime), envelopeJSON("unowned", "d", 4, baseTime)))
	payments := e.token("payments-viewer", quarantine.RoleViewer, "payments")

	if n := e.count(payments, ""); n != 2 {
		t.Fatalf("scoped token sees %d, want 2", n)
	}
	if n := e.count(payments, "&owner=orders"); n != 0 {
		t.Fatalf("foreign owner gave %d", n)
	}
	if n := e.count(payments, "&owner=orders&owner=payments"); n != 2 {
		t.Fatalf("mixed owners gave %d", n)
	}
	if n := e.count(payments, "&queue=orders.x"); n != 0 {
		t.Fatalf("foreign queue gave %d", n)
	}
	own := e.message(res.Items[0].ID, payments)
	if own.Owner != "payments" {
		t.Fatalf("own message %+v", own.Message)
	}
	foreign := e.get("/api/v1/messages/"+res.Items[2].ID, payments).problem(t, http.StatusNotFound, "id")
	missing := e.get("/api/v1/messages/"+quarantine.NewID(baseTime), payments).problem(t, http.StatusNotFound, "id")
	if foreign.Detail != missing.Detail || foreign.Title != missing.Title {
		t.Fatalf("a foreign message is told apart from a missing one: %+v vs %+v", foreign, missing)
	}
	e.get("/api/v1/messages/"+res.Items[3].ID, payments).problem(t, http.StatusNotFound, "id")

	// Audit routes need a token without owners, or an admin.
	e.get("/api/v1/audit", payments).problem(t, http.StatusForbidden, "")
	e.get("/api/v1/audit/verify", payments).problem(t, http.StatusForbidden, "")
	scopedAdmin := e.token("payments-admin", quarantine.RoleAdmin, "payments")
	for _, s := range []string{scopedAdmin, e.viewer} {
		if r := e.get("/api/v1/audit", s); r.status != http.StatusOK {
			t.Fatalf("audit: %d", r.status)
		}
	}
	if d := e.denials(); len(d) != 2 || d[0].Actor != "token:payments-viewer" {
		t.Fatalf("denials %+v", d)
	}
}

func TestAuthOwnerScopedIngest(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ops := e.token("payments-ops", quarantine.RoleOperator, "payments")
	if res := e.ingestOK(ops, envelopeJSON("billing", "a", 1, baseTime)); res.Stored != 1 {
		t.Fatalf("own queue: %+v", res)
	}
	// One foreign envelope refuses the whole request.
	body := array(envelopeJSON("billing", "a", 2, baseTime), envelopeJSON("orders.x", "b", 3, baseTime))
	e.ingest(ops, body).problem(t, http.StatusForbidden, "")
	// An envelope whose queue cannot be read has no owner: foreign too.
	e.ingest(ops, []byte(`not json`)).problem(t, http.StatusForbidden, "")
	if n := e.count(e.admin, ""); n != 1 {
		t.Fatalf("%d messages stored, want 1", n)
	}
	d := e.denials()
	if len(d) != 2 {
		t.Fatalf("denials %+v", d)
	}
	var details map[string]any
	_ = json.Unmarshal(d[0].Details, &details)
	if details["owner"] != "orders" || details["index"] != 1.0 {
		t.Fatalf("details %v", details)
	}
}

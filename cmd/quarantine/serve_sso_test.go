package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oauth2-proxy/mockoidc"

	"github.com/quarantine-dev/quarantine"
)

// TestServe_SSOSignIn: serve with auth.oidc (the secret from a file)
// against a real provider on loopback: /login offers SSO, the code flow
// ends on the overview, signed in as the person with their group's role.
func TestServe_SSOSignIn(t *testing.T) {
	t.Parallel()
	p, err := mockoidc.NewServer(nil)
	if err != nil {
		t.Fatal(err)
	}
	pln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(pln, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown() })
	p.QueueUser(&mockoidc.MockUser{Subject: "u-9", Email: "dana@example.com", Groups: []string{"reports-team"}})

	// The redirect URL names the port: take a free one first.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	dir := t.TempDir()
	pc := p.Config()
	secret := filepath.Join(dir, "oidc-secret")
	if err := os.WriteFile(secret, []byte(pc.ClientSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "quarantine.yaml")
	if err := os.WriteFile(cfg, []byte(`
auth:
  oidc:
    issuer: `+pc.Issuer+`
    client_id: `+pc.ClientID+`
    client_secret_file: `+secret+`
    redirect_url: http://`+addr+`/auth/oidc/callback
    scopes: [email, groups]
    roles:
      - {group: reports-team, role: operator, owners: [reports]}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	m, _, _ := serve(t, "--config", cfg, "--listen", addr, "--database", "sqlite:"+filepath.Join(dir, "q.db"))
	base := "http://" + m.Addr()

	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	get := func(path string) (*http.Response, string) {
		t.Helper()
		res, err := c.Get(path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}
	if _, body := get(base + "/login"); !strings.Contains(body, "Sign in with SSO") {
		t.Fatalf("/login offers no SSO: %s", body)
	}
	res, body := get(base + "/auth/oidc/login")
	if res.Request.URL.Path != "/overview" || !strings.Contains(body, "oidc:dana@example.com (operator: reports)") {
		t.Fatalf("SSO ended at %s with %d: %s", res.Request.URL, res.StatusCode, body)
	}
	// The sign-in is in the audit log, under the person.
	evs, err := m.store.ListAudit(context.Background(), quarantine.AuditFilter{Action: quarantine.ActionLogin, Limit: 10})
	if err != nil || len(evs) != 1 || evs[0].Actor != "oidc:dana@example.com" {
		t.Fatalf("auth.login events %+v (%v), want one by oidc:dana@example.com", evs, err)
	}
}

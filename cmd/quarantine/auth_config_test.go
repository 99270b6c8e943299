package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
)

func TestLoadConfig_AuthSessions(t *testing.T) {
	t.Parallel()
	c, err := LoadConfig(writeConfig(t, "auth:\n  session_idle: 15m\n  session_max: 1d\n"), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Auth.SessionIdle != 15*time.Minute || c.Auth.SessionMax != 24*time.Hour {
		t.Fatalf("auth = %+v", c.Auth)
	}
	d := DefaultConfig()
	if d.Auth.SessionIdle != 30*time.Minute || d.Auth.SessionMax != 12*time.Hour {
		t.Fatalf("default auth = %+v, want 30m and 12h", d.Auth)
	}
}

func TestLoadConfig_AuthErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, yaml, field, want string }{
		{"idle too short", "auth:\n  session_idle: 10s\n", "auth.session_idle", "at least 1m"},
		{"idle no unit", "auth:\n  session_idle: 30\n", "auth.session_idle", "has no unit"},
		{"idle zero", "auth:\n  session_idle: 0\n", "auth.session_idle", "not a duration"},
		{"max below idle", "auth:\n  session_idle: 2h\n  session_max: 1h\n", "auth.session_max", "shorter than auth.session_idle"},
		{"max too long", "auth:\n  session_max: 60d\n", "auth.session_max", "at most 30d"},
		{"unknown key", "auth:\n  session_ttl: 1h\n", "auth.session_ttl", `unknown key "session_ttl"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := LoadConfig(writeConfig(t, tc.yaml), envOf(nil))
			if quarantine.ErrorCode(err) != quarantine.EINVALID || quarantine.ErrorField(err) != tc.field {
				t.Fatalf("err %v (field %q), want EINVALID on %s", err, quarantine.ErrorField(err), tc.field)
			}
			if msg := describe(err); !strings.Contains(msg, tc.want) {
				t.Fatalf("message %q does not say %q", msg, tc.want)
			}
		})
	}
}

func TestLoadConfig_AuthOIDC(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "oidc-secret")
	if err := os.WriteFile(secretFile, []byte("s3cr3t-value\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(writeConfig(t, `
auth:
  oidc:
    issuer: https://idp.example.com/realms/ops
    client_id: quarantine
    client_secret_file: `+secretFile+`
    redirect_url: https://quarantine.example.com/auth/oidc/callback
    scopes: [email, groups]
    groups_claim: roles
    roles:
      - {group: payments-oncall, role: operator, owners: [payments, billing]}
      - {group: sre, role: admin}
`), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	o := c.Auth.OIDC
	if o == nil || o.Issuer != "https://idp.example.com/realms/ops" || o.ClientID != "quarantine" || o.ClientSecret.Reveal() != "s3cr3t-value" ||
		o.RedirectURL != "https://quarantine.example.com/auth/oidc/callback" || strings.Join(o.Scopes, ",") != "email,groups" ||
		o.GroupsClaim != "roles" || len(o.Roles) != 2 || o.Roles[0].Role != quarantine.RoleOperator ||
		strings.Join(o.Roles[0].Owners, ",") != "payments,billing" || o.Roles[1].Role != quarantine.RoleAdmin {
		t.Fatalf("auth.oidc = %+v", o)
	}
	if s := fmt.Sprintf("%v %+v", c.Auth, *o); strings.Contains(s, "s3cr3t") {
		t.Fatalf("the client secret prints: %s", s)
	}
	if DefaultConfig().Auth.OIDC != nil {
		t.Fatal("SSO is on by default")
	}
}

func TestLoadConfig_AuthOIDCErrors(t *testing.T) {
	t.Parallel()
	ok := func(extra string) string {
		lines := map[string]string{
			"issuer": "https://idp.example.com", "client_id": "q", "client_secret": "x",
			"redirect_url": "https://q.example.com/auth/oidc/callback", "roles": "[{group: g, role: viewer}]",
		}
		k, v, _ := strings.Cut(extra, ": ")
		if v == "DELETE" {
			delete(lines, k)
		} else if k != "" {
			lines[k] = v
		}
		var b strings.Builder
		b.WriteString("auth:\n  oidc:\n")
		for _, key := range []string{"issuer", "client_id", "client_secret", "client_secret_file", "redirect_url", "scopes", "roles", "frob"} {
			if v, set := lines[key]; set {
				b.WriteString("    " + key + ": " + v + "\n")
			}
		}
		return b.String()
	}
	for _, tc := range []struct{ name, change, field, want string }{
		{"no issuer", "issuer: DELETE", "auth.oidc.issuer", "not an absolute URL"},
		{"plain http issuer", "issuer: http://idp.example.com", "auth.oidc.issuer", "must be https"},
		{"no client id", "client_id: DELETE", "auth.oidc.client_id", "client id"},
		{"no secret", "client_secret: DELETE", "auth.oidc.client_secret", "client_secret_file"},
		{"both secrets", "client_secret_file: /nonexistent", "auth.oidc.client_secret", "not both"},
		{"redirect elsewhere", "redirect_url: https://q.example.com/callback", "auth.oidc.redirect_url", "/auth/oidc/callback"},
		{"no roles", "roles: DELETE", "auth.oidc.roles", "at least one group"},
		{"unknown role", "roles: [{group: g, role: root}]", "auth.oidc.roles[0].role", `unknown role "root"`},
		{"role without group", "roles: [{role: viewer}]", "auth.oidc.roles[0].group", "group name"},
		{"bad scope", `scopes: ["a b"]`, "auth.oidc.scopes[0]", "not a scope"},
		{"unknown key", "frob: 1", "auth.oidc.frob", `unknown key "frob"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := LoadConfig(writeConfig(t, ok(tc.change)), envOf(nil))
			if quarantine.ErrorCode(err) != quarantine.EINVALID || quarantine.ErrorField(err) != tc.field {
				t.Fatalf("err %v (field %q), want EINVALID on %s", err, quarantine.ErrorField(err), tc.field)
			}
			if msg := describe(err); !strings.Contains(msg, tc.want) {
				t.Fatalf("message %q does not say %q", msg, tc.want)
			}
		})
	}
}

func TestLoadConfig_AuthProxy(t *testing.T) {
	t.Parallel()
	c, err := LoadConfig(writeConfig(t, `
trusted_proxies: [10.1.2.3]
auth:
  proxy:
    user_header: X-Forwarded-Email
    groups_header: X-Forwarded-Groups
    roles: [{group: sre, role: admin}]
`), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Auth.Proxy
	if p == nil || p.UserHeader != "X-Forwarded-Email" || p.GroupsHeader != "X-Forwarded-Groups" || len(p.Roles) != 1 || p.Roles[0].Role != quarantine.RoleAdmin {
		t.Fatalf("auth.proxy = %+v", p)
	}
	for _, tc := range []struct{ name, yaml, field, want string }{
		{"no trusted proxy", "auth:\n  proxy: {user_header: X-User, groups_header: X-Groups, roles: [{group: g, role: viewer}]}\n", "auth.proxy", "trusted_proxies"},
		{"no user header", "trusted_proxies: [10.0.0.1]\nauth:\n  proxy: {groups_header: X-Groups, roles: [{group: g, role: viewer}]}\n", "auth.proxy.user_header", "not a header name"},
		{"bad groups header", "trusted_proxies: [10.0.0.1]\nauth:\n  proxy: {user_header: X-User, groups_header: \"X Groups\", roles: [{group: g, role: viewer}]}\n", "auth.proxy.groups_header", "not a header name"},
		{"no roles", "trusted_proxies: [10.0.0.1]\nauth:\n  proxy: {user_header: X-User, groups_header: X-Groups}\n", "auth.proxy.roles", "at least one group"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadConfig(writeConfig(t, tc.yaml), envOf(nil))
			if quarantine.ErrorCode(err) != quarantine.EINVALID || quarantine.ErrorField(err) != tc.field {
				t.Fatalf("err %v (field %q), want EINVALID on %s", err, quarantine.ErrorField(err), tc.field)
			}
			if msg := describe(err); !strings.Contains(msg, tc.want) {
				t.Fatalf("message %q does not say %q", msg, tc.want)
			}
		})
	}
}

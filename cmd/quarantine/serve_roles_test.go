package main

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/pgtest"
)

// On PostgreSQL, migrate runs as the owner of the tables and grants the
// runtime role (--runtime-role); serve then runs as that role: it creates
// the first admin token, ingests, replays to a destination and audits all
// of it, and the audit chain verifies, read as the runtime role. Given
// the owner's URL while database_runtime_role names another role, serve
// refuses to start.
func TestServe_AsRuntimeRole(t *testing.T) {
	t.Parallel()
	owner, app := pgtest.Role(t, "q_owner"), pgtest.Role(t, "q_app")
	u := pgtest.URL(t)
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	pgtest.Exec(t, u, "ALTER SCHEMA "+p.Query().Get("search_path")+" OWNER TO "+owner)
	ownerURL, appURL := pgtest.WithUser(t, u, owner), pgtest.WithUser(t, u, app)

	code, stdout, stderr := execute(t, "migrate", "--database", ownerURL, "--runtime-role", app)
	if code != 0 || !strings.Contains(stdout, "runtime role "+app+": granted") {
		t.Fatalf("migrate --runtime-role: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}

	rc := &flowReceiver{got: map[string][]byte{}}
	dest := httptest.NewServer(rc)
	t.Cleanup(dest.Close)
	cfg := filepath.Join(t.TempDir(), "quarantine.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`
database_runtime_role: %s
destinations:
  - queues: ["work.*"]
    kind: http
    url: %s/replay
replay: {canary: 0, poll: 50ms}
`, app, dest.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	// Given the owner's URL by mistake, serve refuses to start.
	wrong, _, _ := newTestMain()
	if err := wrong.ParseFlags(t.Context(), []string{"serve", "--listen", "127.0.0.1:0", "--config", cfg, "--database", ownerURL}); err != nil {
		t.Fatal(err)
	}
	err = wrong.Run(t.Context())
	_ = wrong.Close()
	if quarantine.ErrorField(err) != "database_runtime_role" || !strings.Contains(quarantine.ErrorMessage(err), owner) {
		t.Fatalf("serve as the owner with database_runtime_role %s: %v, want a refusal naming both roles", app, err)
	}
	// --migrate with nothing to do is fine for the runtime role.
	m, logs, stop := serve(t, "--config", cfg, "--database", appURL, "--migrate")
	banner := reLoginURL.FindStringSubmatch(logs.String())
	if banner == nil {
		t.Fatalf("no admin token printed:\n%s", logs)
	}
	admin := client{t: t, base: "http://" + m.Addr(), token: banner[1]}
	var envs []string
	for i := range 3 {
		envs = append(envs, fmt.Sprintf(`{"envelope":"quarantine.failure/v1","job":{"id":"j%d","name":"build-report","queue":"work.reports",
			"idempotency_key":"report-%d","payload":{"n":%d}},"failure":{"class":"exhausted","reason":"timeout"}}`, i, i, i))
	}
	var ing struct{ Items []struct{ ID string } }
	admin.json("POST", "/api/v1/ingest", []byte("["+strings.Join(envs, ",")+"]"), 200, &ing)
	if len(ing.Items) != 3 {
		t.Fatalf("ingested %d", len(ing.Items))
	}
	var created struct {
		Replay struct{ ID string } `json:"replay"`
	}
	admin.json("POST", "/api/v1/replays", []byte(`{"filter":{"queue":["work.reports"]},"expect_count":3,"rate":100,"reason":"fixed"}`), 201, &created)
	var b struct {
		State  string         `json:"state"`
		Counts map[string]int `json:"counts"`
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		admin.json("GET", "/api/v1/replays/"+created.Replay.ID, nil, 200, &b)
		if b.State == "completed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replay is %s %v", b.State, b.Counts)
		}
	}
	rc.mu.Lock()
	got := len(rc.got)
	rc.mu.Unlock()
	if b.Counts["published"] != 3 || got != 3 {
		t.Fatalf("counts %v, the destination got %d: want 3 published", b.Counts, got)
	}
	var audit struct {
		Items []quarantine.AuditEvent `json:"items"`
	}
	admin.json("GET", "/api/v1/audit?limit=100", nil, 200, &audit)
	if len(audit.Items) < 3 {
		t.Fatalf("audit events %d, want the token, the replay and its items", len(audit.Items))
	}
	stop()

	code, stdout, stderr = execute(t, "audit", "verify", "--database", appURL)
	var v quarantine.AuditVerification
	if err := json.Unmarshal([]byte(stdout), &v); code != 0 || err != nil || !v.OK || v.Checked < int64(len(audit.Items)) {
		t.Fatalf("audit verify as the runtime role: exit %d, %+v, %v\n%s", code, v, err, stderr)
	}
	// The runtime role cannot migrate a schema that needs it: it owns
	// nothing and cannot create.
	pgtest.Exec(t, ownerURL, "DELETE FROM schema_migrations WHERE version = 14")
	pgtest.Exec(t, ownerURL, "DROP TRIGGER audit_head_keep ON audit_head; DROP TRIGGER audit_head_forward_only ON audit_head; DROP FUNCTION audit_head_forward_only()")
	if code, _, stderr := execute(t, "migrate", "--database", appURL); code == 0 || !strings.Contains(stderr, "must be owner") && !strings.Contains(stderr, "permission denied") {
		t.Fatalf("migrate as the runtime role: exit %d\n%s", code, stderr)
	}
}

// database_runtime_role is for PostgreSQL: with the embedded store it is
// a configuration error naming the key, from the flag or the environment.
func TestConfig_RuntimeRoleNeedsPostgres(t *testing.T) {
	t.Parallel()
	m, _, _ := newTestMain()
	err := m.ParseFlags(t.Context(), []string{"migrate", "--database", "sqlite:" + filepath.Join(t.TempDir(), "q.db"), "--runtime-role", "quarantine_app"})
	if quarantine.ErrorCode(err) != quarantine.EINVALID || quarantine.ErrorField(err) != "database_runtime_role" ||
		!strings.Contains(quarantine.ErrorMessage(err), "--runtime-role") {
		t.Fatalf("err = %v, want EINVALID naming database_runtime_role and --runtime-role", err)
	}
	m, _, _ = newTestMain()
	env := map[string]string{EnvDatabase: "postgres://owner@db/q", EnvRuntimeRole: "quarantine_app"}
	m.Getenv = func(k string) string { return env[k] }
	if err := m.ParseFlags(t.Context(), []string{"migrate"}); err != nil || m.Config.DatabaseRuntimeRole != "quarantine_app" {
		t.Fatalf("from the environment: %q, %v", m.Config.DatabaseRuntimeRole, err)
	}
}

// The file's keys load, and the environment wins over them; a role on
// the embedded store is refused with the file's line.
func TestLoadConfig_TLSAndRuntimeRoleKeys(t *testing.T) {
	t.Parallel()
	p := writeConfig(t, "database: postgres://owner@db/q\ndatabase_runtime_role: quarantine_app\ntls:\n  cert_file: /tls/crt\n  key_file: /tls/key\n")
	c, err := LoadConfig(p, envOf(nil))
	if err != nil || c.DatabaseRuntimeRole != "quarantine_app" || c.TLS != (TLSConfig{CertFile: "/tls/crt", KeyFile: "/tls/key"}) {
		t.Fatalf("LoadConfig = %+v %+v, %v", c.TLS, c.DatabaseRuntimeRole, err)
	}
	c, err = LoadConfig(p, envOf(map[string]string{EnvTLSCertFile: "/other/crt", EnvRuntimeRole: "other_app"}))
	if err != nil || c.DatabaseRuntimeRole != "other_app" || c.TLS.CertFile != "/other/crt" || c.TLS.KeyFile != "/tls/key" {
		t.Fatalf("with the environment: %+v %q, %v", c.TLS, c.DatabaseRuntimeRole, err)
	}
	p = writeConfig(t, "database: sqlite:q.db\ndatabase_runtime_role: quarantine_app\n")
	_, err = LoadConfig(p, envOf(nil))
	if quarantine.ErrorField(err) != "database_runtime_role" || !strings.Contains(quarantine.ErrorMessage(err), ":2: database_runtime_role") {
		t.Fatalf("a role on SQLite: %v, want the key and its line", err)
	}
}

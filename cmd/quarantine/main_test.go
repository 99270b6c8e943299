package main

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/pgtest"
)

var (
	reLoginURL   = regexp.MustCompile(`http://127\.0\.0\.1:\d+/\?token=(qt_[A-Za-z0-9_-]+)`)
	reCurlBearer = regexp.MustCompile(`Authorization: Bearer (qt_[A-Za-z0-9_-]+)`)
	reSecretLine = regexp.MustCompile(`^qt_[A-Za-z0-9_-]{43}\n$`)
)

// jsonPayload is sent as job.payload; compact, so the stored bytes are
// exactly these.
const jsonPayload = `{"order_id":42,"amount":"9.99","note":"<b>&amp;</b> ü"}`

func envelope(id, queue, payloadField string) []byte {
	return []byte(fmt.Sprintf(`{
  "envelope": "quarantine.failure/v1",
  "job": {
    "id": %q,
    "name": "charge_card",
    "queue": %q,
    "idempotency_key": "order:%s",
    "schema_version": "2",
    "attempts": 5,
    "enqueued_at": "2025-01-02T03:04:05Z",
    "headers": {"trace_id": "abc123"},
    %s
  },
  "failure": {
    "class": "exhausted",
    "reason": "card declined: insufficient funds",
    "failed_at": "2025-01-02T03:09:05Z",
    "first_failed_at": "2025-01-02T03:04:06Z"
  }
}`, id, queue, id, payloadField))
}

func TestE2E_SQLite(t *testing.T) {
	t.Parallel()
	db := "sqlite:" + filepath.Join(t.TempDir(), "data", "quarantine.db")
	testEndToEnd(t, db)
	testAuditTamper(t, db)
}

func TestE2E_Postgres(t *testing.T) {
	t.Parallel()
	testEndToEnd(t, pgtest.URL(t), "--migrate")
}

// testEndToEnd boots the real wiring twice on db and drives it over HTTP
// and through the subcommands.
func testEndToEnd(t *testing.T, db string, serveArgs ...string) {
	serveArgs = append([]string{"--database", db}, serveArgs...)
	m, stderr, stop := serve(t, serveArgs...)
	logs := stderr.String()

	// The first start creates an admin token and prints it once.
	urls := reLoginURL.FindAllStringSubmatch(logs, -1)
	curls := reCurlBearer.FindAllStringSubmatch(logs, -1)
	if len(urls) != 1 || len(curls) != 1 || urls[0][1] != curls[0][1] {
		t.Fatalf("want one login URL and one curl line with the same token, stderr:\n%s", logs)
	}
	if !strings.Contains(urls[0][0], m.Addr()) {
		t.Fatalf("login URL %q does not point at %s", urls[0][0], m.Addr())
	}
	if !strings.Contains(logs, "audit head") {
		t.Fatalf("the audit head is not logged:\n%s", logs)
	}
	admin := client{t: t, base: "http://" + m.Addr(), token: urls[0][1]}
	anon := client{t: t, base: admin.base}

	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		if status, _, b := anon.do("GET", p, nil); status != 200 {
			t.Fatalf("GET %s: %d %s", p, status, b)
		}
	}
	if status, ct, _ := anon.do("GET", "/api/v1/messages", nil); status != 401 || !strings.HasPrefix(ct, "application/problem+json") {
		t.Fatalf("unauthenticated list: %d %s, want 401 problem+json", status, ct)
	}

	// token create prints the new secret, and nothing else, on stdout.
	code, out, errOut := execute(t, "token", "create", "--database", db, "--name", "ci", "--role", "operator")
	if code != 0 || !reSecretLine.MatchString(out) {
		t.Fatalf("token create: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	op := client{t: t, base: admin.base, token: strings.TrimSpace(out)}
	if code, _, errOut := execute(t, "token", "create", "--database", db, "--name", "ci", "--role", "viewer"); code != 1 || !strings.Contains(errOut, "quarantine:") {
		t.Fatalf("a second active token named ci: exit %d, stderr %q", code, errOut)
	}

	// Ingest a JSON payload and a binary one; a repeat is a duplicate.
	binary := []byte{0, 1, 2, 0xff, 0xfe, '\n'}
	body := []byte("[" + string(envelope("job-1", "payments.charges", `"payload": `+jsonPayload)) + "," +
		string(envelope("job-2", "reports", fmt.Sprintf(`"payload_base64": %q, "content_type": "application/octet-stream"`,
			base64.StdEncoding.EncodeToString(binary)))) + "]")
	var ing struct {
		Received, Stored, Duplicates int
		Items                        []struct {
			ID  string
			New bool
		}
	}
	op.json("POST", "/api/v1/ingest", body, 200, &ing)
	if ing.Received != 2 || ing.Stored != 2 || len(ing.Items) != 2 || !ing.Items[0].New || !ing.Items[1].New {
		t.Fatalf("ingest: %+v", ing)
	}
	first := ing.Items
	op.json("POST", "/api/v1/ingest", body, 200, &ing)
	if ing.Stored != 0 || ing.Duplicates != 2 || ing.Items[0].ID != first[0].ID || ing.Items[1].ID != first[1].ID {
		t.Fatalf("re-ingest is not deduplicated: %+v (first %+v)", ing, first)
	}

	// List, then get each message with its exact payload.
	var page struct {
		Items []quarantine.Message
	}
	op.json("GET", "/api/v1/messages?queue=payments.charges", nil, 200, &page)
	if len(page.Items) != 1 || page.Items[0].ID != first[0].ID || page.Items[0].JobName != "charge_card" ||
		page.Items[0].IdempotencyKey != "order:job-1" || page.Items[0].FailureClass != quarantine.ClassExhausted {
		t.Fatalf("list: %+v", page.Items)
	}
	var got map[string]json.RawMessage
	op.json("GET", "/api/v1/messages/"+first[0].ID, nil, 200, &got)
	if string(got["payload"]) != jsonPayload {
		t.Fatalf("payload %s, want the bytes sent %s", got["payload"], jsonPayload)
	}
	if sum := sha256.Sum256([]byte(jsonPayload)); string(got["payload_sha256"]) != `"`+hex.EncodeToString(sum[:])+`"` {
		t.Fatalf("payload_sha256 %s is not the SHA-256 of the payload", got["payload_sha256"])
	}
	op.json("GET", "/api/v1/messages/"+first[1].ID, nil, 200, &got)
	var b64 string
	_ = json.Unmarshal(got["payload_base64"], &b64)
	if raw, err := base64.StdEncoding.DecodeString(b64); err != nil || string(raw) != string(binary) {
		t.Fatalf("binary payload %q (%v), want %q", raw, err, binary)
	}

	// The audit chain verifies over HTTP and from the command line, and
	// the head the API reports is on the chain the command walks.
	var v quarantine.AuditVerification
	admin.json("GET", "/api/v1/audit/verify", nil, 200, &v)
	if !v.OK || v.Checked < 2 || v.Head.Seq != v.Checked {
		t.Fatalf("API audit verify: %+v", v)
	}
	code, out, errOut = execute(t, "audit", "verify", "--database", db,
		"--head-seq", fmt.Sprint(v.Head.Seq), "--head-hash", v.Head.Hash)
	var cv quarantine.AuditVerification
	if err := json.Unmarshal([]byte(out), &cv); code != 0 || err != nil || !cv.OK || cv.Head.Seq < v.Head.Seq {
		t.Fatalf("audit verify: exit %d, %v, stdout %s, stderr %s", code, err, out, errOut)
	}

	// A second start on the same database prints no token, and the first
	// admin token still works.
	stop()
	m2, stderr2, _ := serve(t, serveArgs...)
	if logs := stderr2.String(); strings.Contains(logs, "token=") || strings.Contains(logs, "Bearer qt_") {
		t.Fatalf("the second start printed a token:\n%s", logs)
	}
	admin.base = "http://" + m2.Addr()
	admin.json("GET", "/api/v1/messages", nil, 200, &page)
	if len(page.Items) != 2 {
		t.Fatalf("after a restart the list has %d messages, want 2", len(page.Items))
	}
}

// testAuditTamper alters one audit row behind the service's back: the
// audit verify command must report it and exit 1.
func testAuditTamper(t *testing.T, db string) {
	sqldb, err := sql.Open("sqlite", strings.TrimPrefix(db, "sqlite:")+"?_pragma=busy_timeout(10000)") // the service may be polling it
	if err != nil {
		t.Fatal(err)
	}
	defer sqldb.Close()
	for _, q := range []string{
		"DROP TRIGGER IF EXISTS audit_log_no_update",
		"UPDATE audit_log SET actor = 'mallory' WHERE seq = 1",
	} {
		if _, err := sqldb.ExecContext(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	code, out, errOut := execute(t, "audit", "verify", "--database", db)
	var v quarantine.AuditVerification
	if err := json.Unmarshal([]byte(out), &v); code != 1 || err != nil || v.OK || v.FirstBadSeq != 1 {
		t.Fatalf("audit verify of a tampered chain: exit %d, %v, stdout %s, stderr %s", code, err, out, errOut)
	}
	if !strings.Contains(errOut, "does not verify") {
		t.Fatalf("stderr %q does not say the chain is broken", errOut)
	}
}

func TestServe_PostgresSchemaBehind(t *testing.T) {
	t.Parallel()
	db := pgtest.URL(t)
	m, _, _ := newTestMain()
	if err := m.ParseFlags(context.Background(), []string{"serve", "--listen", "127.0.0.1:0", "--database", db}); err != nil {
		t.Fatal(err)
	}
	err := m.Run(context.Background())
	_ = m.Close()
	if err == nil {
		t.Fatal("serve on an empty PostgreSQL schema without --migrate started")
	}
	for _, want := range []string{"quarantine migrate", "--migrate", "version 0"} {
		if !strings.Contains(describe(err), want) {
			t.Fatalf("error %q does not say %q", describe(err), want)
		}
	}
	// The same through Execute: exit 1, the message on stderr, and the
	// other commands give the same advice.
	code, _, errOut := execute(t, "serve", "--listen", "127.0.0.1:0", "--database", db)
	if code != 1 || !strings.Contains(errOut, "quarantine migrate") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	code, out, errOut := execute(t, "token", "create", "--database", db, "--name", "x", "--role", "admin")
	if code != 1 || out != "" || !strings.Contains(errOut, "quarantine migrate") {
		t.Fatalf("token create on an unmigrated schema: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// migrate fixes it.
	code, out, errOut = execute(t, "migrate", "--database", db)
	if code != 0 || !strings.Contains(out, "schema at version") || strings.Contains(out, "version 0 of") {
		t.Fatalf("migrate: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, out, errOut = execute(t, "audit", "verify", "--database", db); code != 0 || !strings.Contains(out, `"ok": true`) {
		t.Fatalf("audit verify after migrate: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// A rolling upgrade migrates first: the previous release's binary keeps
// serving (and restarting) on a schema whose newer migrations only
// expand it, and refuses one where a newer migration contracts it (a
// file with a "-- contract:" line, recorded in schema_contracts).
func TestServe_PostgresSchemaAhead(t *testing.T) {
	t.Parallel()
	db := pgtest.URL(t)
	if code, out, errOut := execute(t, "migrate", "--database", db); code != 0 {
		t.Fatalf("migrate: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	serve := func() error {
		m, _, _ := newTestMain()
		if err := m.ParseFlags(context.Background(), []string{"serve", "--listen", "127.0.0.1:0", "--database", db}); err != nil {
			t.Fatal(err)
		}
		err := m.Run(context.Background())
		_ = m.Close()
		return err
	}
	// A newer release added an expanding migration.
	pgtest.Exec(t, db, "INSERT INTO schema_migrations (version, applied_at) SELECT max(version) + 1, now() FROM schema_migrations")
	if err := serve(); err != nil {
		t.Fatalf("serve on a schema one expanding migration ahead: %v", err)
	}
	// And then one that contracts.
	pgtest.Exec(t, db, "INSERT INTO schema_migrations (version, applied_at) SELECT max(version) + 1, now() FROM schema_migrations")
	pgtest.Exec(t, db, "CREATE TABLE schema_contracts (version integer PRIMARY KEY)")
	pgtest.Exec(t, db, "INSERT INTO schema_contracts SELECT max(version) FROM schema_migrations")
	err := serve()
	if err == nil || !strings.Contains(describe(err), "newer than this build") || !strings.Contains(describe(err), "upgrade quarantine") {
		t.Fatalf("serve on a schema a contract migration ahead: %v", err)
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine/internal/pgtest"
)

// TestServe_OperationsWiring boots the real service with redaction, a
// JSON Schema and a short retention, and checks each reaches the API or
// the purge loop: a viewer sees the card number masked, an edit that
// breaks the schema is 422 with the violation, and a discarded message
// loses its payload to the retention loop within a few periods.
func TestServe_OperationsWiring_SQLite(t *testing.T) {
	t.Parallel()
	testOperationsWiring(t)
}

func TestServe_OperationsWiring_Postgres(t *testing.T) {
	t.Parallel()
	testOperationsWiring(t, "--database", pgtest.URL(t), "--migrate")
}

func testOperationsWiring(t *testing.T, serveArgs ...string) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "charge.json"), []byte(`{"type":"object","required":["amount"],
		"properties":{"amount":{"type":"number"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "quarantine.yaml")
	if err := os.WriteFile(cfg, []byte(`
database: sqlite:`+filepath.Join(dir, "q.db")+`
redact: {json_pointers: [/card/number]}
schemas: {charge_card: charge.json}
retention: {replayed: 0, discarded: 1ms, every: 1s}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	m, stderr, _ := serve(t, append([]string{"--config", cfg}, serveArgs...)...)
	urls := reLoginURL.FindStringSubmatch(stderr.String())
	if urls == nil {
		t.Fatalf("no admin token printed:\n%s", stderr)
	}
	admin := client{t: t, base: "http://" + m.Addr(), token: urls[1]}
	var tok struct{ Secret string }
	admin.json("POST", "/api/v1/tokens", []byte(`{"name":"v","role":"viewer"}`), 201, &tok)
	viewer := client{t: t, base: admin.base, token: tok.Secret}

	env := []byte(`{"envelope":"quarantine.failure/v1","job":{"name":"charge_card","queue":"billing","idempotency_key":"k1",
		"payload":{"card":{"number":"4111111111111111"},"amount":5}},"failure":{"class":"permanent","reason":"declined"}}`)
	var ing struct{ Items []struct{ ID string } }
	admin.json("POST", "/api/v1/ingest", env, 200, &ing)
	id := ing.Items[0].ID

	var seen struct {
		Payload       json.RawMessage `json:"payload"`
		PayloadSHA256 string          `json:"payload_sha256"`
		Flags         []string        `json:"flags"`
	}
	viewer.json("GET", "/api/v1/messages/"+id, nil, 200, &seen)
	if !strings.Contains(string(seen.Payload), `"<redacted>"`) || strings.Contains(string(seen.Payload), "4111") {
		t.Fatalf("viewer sees %s", seen.Payload)
	}
	admin.json("GET", "/api/v1/messages/"+id, nil, 200, &seen)
	if !strings.Contains(string(seen.Payload), "4111111111111111") {
		t.Fatalf("admin sees %s", seen.Payload)
	}

	// The schema applies to edits of charge_card.
	status, _, body := admin.doWith("PUT", "/api/v1/messages/"+id+"/payload", []byte(`{"payload":{"amount":"5"},"reason":"x"}`),
		"If-Match", `"`+seen.PayloadSHA256+`"`)
	if status != 422 || !strings.Contains(string(body), `"pointer":"/amount"`) {
		t.Fatalf("schema violation: %d %s", status, body)
	}

	// Discarded, then purged by the loop.
	admin.json("POST", "/api/v1/messages/"+id+"/discard", []byte(`{"reason":"test"}`), 200, nil)
	deadline := time.Now().Add(15 * time.Second)
	for {
		admin.json("GET", "/api/v1/messages/"+id, nil, 200, &seen)
		if strings.Contains(strings.Join(seen.Flags, ","), "payload_purged") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the retention loop did not purge the discarded payload; flags %v", seen.Flags)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var audit struct{ Items []struct{ Actor string } }
	admin.json("GET", "/api/v1/audit?action=retention.purge", nil, 200, &audit)
	if len(audit.Items) != 1 || audit.Items[0].Actor != "system:retention" {
		t.Fatalf("purge events %+v", audit.Items)
	}
	_, _, metrics := admin.do("GET", "/metrics", nil)
	if !strings.Contains(string(metrics), `quarantine_retention_purged_total{status="discarded"} 1`) {
		t.Fatal("the purge is not counted on /metrics")
	}
}

// doWith is client.do with request headers (name, value pairs).
func (c client) doWith(method, path string, body []byte, header ...string) (int, http.Header, []byte) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

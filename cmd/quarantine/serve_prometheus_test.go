package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine/internal/testenv"
)

// prometheusBinary finds Debian's prometheus ($QUARANTINE_PROMETHEUS;
// scripts/services.sh prometheus installs it and records it), skipping t
// when there is none, or failing it under CI=true.
func prometheusBinary(t *testing.T) string {
	t.Helper()
	p := testenv.Require(t, testenv.Prometheus, "prometheus")
	if _, err := os.Stat(p); err != nil {
		testenv.Unavailable(t, testenv.Prometheus, fmt.Sprintf("prometheus is not installed: %v", err))
	}
	return p
}

// freePort returns a loopback port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// A real Prometheus scrapes the service's /metrics and fires the shipped
// age rule (deploy/prometheus/quarantine-rules.yaml; its `for:` shortened
// to 1s so that the test does not wait a minute) for an old dead letter.
func TestServe_AlarmRulesInRealPrometheus(t *testing.T) {
	t.Parallel()
	bin := prometheusBinary(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "quarantine.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("database: sqlite:%s\nowners: [{team: payments, queues: [orders]}]\n",
		filepath.Join(dir, "q.db"))), 0o600); err != nil {
		t.Fatal(err)
	}
	m, stderr, _ := serve(t, "--config", cfg)
	urls := reLoginURL.FindStringSubmatch(stderr.String())
	if urls == nil {
		t.Fatalf("no admin token printed:\n%s", stderr)
	}
	admin := client{t: t, base: "http://" + m.Addr(), token: urls[1]}
	failed := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	admin.json("POST", "/api/v1/ingest", []byte(`{"envelope":"quarantine.failure/v1","job":{"id":"j1","name":"charge","queue":"orders",
		"idempotency_key":"order-1","payload":{"n":1}},"failure":{"class":"exhausted","reason":"timeout","failed_at":"`+failed+`"}}`), 200, nil)

	rules, err := os.ReadFile("../../deploy/prometheus/quarantine-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	short := strings.ReplaceAll(string(rules), "for: 1m", "for: 1s")
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), []byte(short), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(fmt.Sprintf(`
global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: [rules.yaml]
scrape_configs:
  - job_name: quarantine
    static_configs: [{targets: ["%s"]}]
`, m.Addr())), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address="+addr)
	var log syncBuffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start prometheus: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	type alert struct {
		Labels map[string]string `json:"labels"`
		State  string            `json:"state"`
	}
	var last []alert
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		resp, err := http.Get("http://" + addr + "/api/v1/alerts")
		if err != nil {
			continue // not up yet
		}
		var body struct {
			Data struct{ Alerts []alert } `json:"data"`
		}
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if err != nil {
			continue
		}
		last = body.Data.Alerts
		for _, a := range last {
			if a.Labels["alertname"] == "QuarantineDeadLetterAge" && a.State == "firing" {
				if a.Labels["queue"] != "orders" || a.Labels["owner"] != "payments" || a.Labels["severity"] != "page" {
					t.Fatalf("the age alert fires with labels %v", a.Labels)
				}
				return
			}
		}
	}
	t.Fatalf("Prometheus never fired QuarantineDeadLetterAge; alerts %+v\nprometheus log:\n%s", last, log.String())
}

// Package testenv tells tests where the project's private service
// instances are: PostgreSQL, RabbitMQ, NATS, goaws, Alertmanager and the
// binaries the tests run (Prometheus, promtool, Chromium, Helm, Podman,
// HAProxy).
//
// scripts/services.sh (what `make services` and `make test` run) starts
// them on loopback ports of their own and writes their addresses to
// .tools/services/env at the module root. A variable set in the
// environment wins; otherwise the value comes from that file, so that
// `go test ./...` after `make services` finds the instances without
// sourcing anything. There are no default addresses: a test never reaches
// a service of the machine's by accident.
package testenv

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// The variables scripts/services.sh writes.
const (
	PostgresURL     = "QUARANTINE_TEST_POSTGRES_URL"
	AMQPURL         = "QUARANTINE_TEST_AMQP_URL"
	RabbitMQNode    = "QUARANTINE_TEST_RABBITMQ_NODE"
	EPMDPort        = "QUARANTINE_TEST_ERL_EPMD_PORT"
	NATSURL         = "QUARANTINE_TEST_NATS_URL"
	SQSEndpoint     = "QUARANTINE_TEST_SQS_ENDPOINT"
	AlertmanagerURL = "QUARANTINE_TEST_ALERTMANAGER_URL"
	Prometheus      = "QUARANTINE_PROMETHEUS"
	Promtool        = "QUARANTINE_PROMTOOL"
	Chromium        = "QUARANTINE_CHROMIUM"
	Helm            = "QUARANTINE_HELM"
	Podman          = "QUARANTINE_PODMAN"
	HAProxy         = "QUARANTINE_HAPROXY"
)

// Lookup returns the value of the variable name: the environment's, else
// the one recorded by scripts/services.sh, else "".
func Lookup(name string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return recorded()[name]
}

// Unavailable ends tb because the service behind name cannot be used:
// under CI=true it fails (CI must never silently skip), otherwise it skips.
// what says what is missing and why.
func Unavailable(tb testing.TB, name, what string) {
	tb.Helper()
	msg := what + " (run `make services`, or set " + name + ")"
	if os.Getenv("CI") == "true" {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
}

// Require returns Lookup(name), or ends tb through Unavailable when it is
// empty.
func Require(tb testing.TB, name, service string) string {
	tb.Helper()
	v := Lookup(name)
	if v == "" {
		Unavailable(tb, name, service+" is not configured")
	}
	return v
}

var (
	once sync.Once
	vars map[string]string
)

// recorded reads the env file of scripts/services.sh once:
// $QUARANTINE_SERVICES_DIR/env, else .tools/services/env at the module
// root (found from the working directory, a package folder under go
// test).
func recorded() map[string]string {
	once.Do(func() {
		vars = map[string]string{}
		dir := os.Getenv("QUARANTINE_SERVICES_DIR")
		if dir == "" {
			root := moduleRoot()
			if root == "" {
				return
			}
			dir = filepath.Join(root, ".tools", "services")
		}
		f, err := os.Open(filepath.Join(dir, "env"))
		if err != nil {
			return
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), "=")
			if ok && k != "" && !strings.HasPrefix(k, "#") {
				vars[k] = v
			}
		}
	})
	return vars
}

// moduleRoot is the nearest folder at or above the working directory
// holding go.mod of this module.
func moduleRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			strings.Contains(string(b), "module github.com/quarantine-dev/quarantine\n") {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// Binary returns the path of the tool recorded in the variable name, else
// the one named file on PATH; without either it ends tb through
// Unavailable (a failure under CI=true).
func Binary(tb testing.TB, name, file string) string {
	tb.Helper()
	if p := Lookup(name); p != "" {
		return p
	}
	p, err := exec.LookPath(file)
	if err != nil {
		Unavailable(tb, name, file+" is not installed")
	}
	return p
}

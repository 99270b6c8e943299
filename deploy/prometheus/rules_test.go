// Package prometheus_test checks the shipped Prometheus rules with
// promtool: they parse (check rules) and fire as their unit tests say
// (test rules quarantine-rules.test.yaml).
package prometheus_test

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/quarantine-dev/quarantine/internal/testenv"
)

// promtool finds the binary: $QUARANTINE_PROMTOOL, the pinned one that
// scripts/services.sh installs under .tools/promtool/ and records
// (internal/testenv). Missing, it skips t, or fails it under CI=true.
func promtool(t *testing.T) string {
	t.Helper()
	p := testenv.Require(t, testenv.Promtool, "promtool")
	if _, err := os.Stat(p); err != nil {
		testenv.Unavailable(t, testenv.Promtool, fmt.Sprintf("promtool is not installed: %v", err))
	}
	return p
}

func run(t *testing.T, bin string, args ...string) string {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestAlarmRulesCheck(t *testing.T) {
	t.Parallel()
	out := run(t, promtool(t), "check", "rules", "quarantine-rules.yaml")
	if !strings.Contains(out, "SUCCESS: 4 rules found") {
		t.Fatalf("promtool check rules: %s, want 4 rules", out)
	}
}

func TestAlarmRulesUnitTests(t *testing.T) {
	t.Parallel()
	out := run(t, promtool(t), "test", "rules", "quarantine-rules.test.yaml")
	if !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool test rules: %s", out)
	}
}

// Package prometheus_test checks the shipped Prometheus rules with
// promtool: they parse (check rules) and fire as their unit tests say
// (test rules quarantine-rules.test.yaml).
package prometheus_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// promtool finds the binary: $QUARANTINE_PROMTOOL, the one
// scripts/services.sh installs under .tools/promtool/, or PATH. Missing,
// it skips t, or fails it under CI=true.
func promtool(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("QUARANTINE_PROMTOOL"); p != "" {
		return p
	}
	found, _ := filepath.Glob("../../.tools/promtool/*/promtool")
	sort.Strings(found)
	if len(found) > 0 {
		p, err := filepath.Abs(found[len(found)-1])
		if err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("promtool"); err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("promtool is not installed (run scripts/services.sh promtool)")
	}
	t.Skip("promtool is not installed (run scripts/services.sh promtool)")
	return ""
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

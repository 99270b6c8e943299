package browsertest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// Axe returns axe-core's browser build (axe.min.js under the module's
// .tools/node, installed by scripts/node-tools.sh), or skips t without it
// (fails it under CI=true).
func Axe(t testing.TB) string {
	t.Helper()
	p := filepath.Join(Root(t), ".tools", "node", "node_modules", "axe-core", "axe.min.js")
	b, err := os.ReadFile(p)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("axe-core is required under CI (%v): run scripts/node-tools.sh", err)
		}
		t.Skipf("no axe-core at %s: run scripts/node-tools.sh", p)
	}
	return string(b)
}

// AxeViolation is one rule that failed on a page, as axe reports it.
type AxeViolation struct {
	ID     string   `json:"id"`
	Impact string   `json:"impact"`
	Help   string   `json:"help"`
	Nodes  []string `json:"nodes"`
}

// axeRun runs axe-core on the page and returns its serious and critical
// violations.
const axeRun = `axe.run(document, {resultTypes: ["violations"]}).then(r => JSON.stringify(
	r.violations.filter(v => v.impact === "serious" || v.impact === "critical").map(v => ({
		id: v.id, impact: v.impact, help: v.help,
		nodes: v.nodes.slice(0, 5).map(n => n.target.join(" ") + ": " + (n.failureSummary || ""))}))))`

// AxeViolations injects axe (Axe's script) into the page and returns its
// serious and critical violations.
func (b *Browser) AxeViolations(axe string) []AxeViolation {
	b.T.Helper()
	b.Do(chromedp.Evaluate[chromedp.Void](axe))
	out := Run(b, chromedp.Evaluate[string](axeRun, chromedp.EvalAwaitPromise))
	var vs []AxeViolation
	if err := json.Unmarshal([]byte(out), &vs); err != nil {
		b.T.Fatalf("axe result %q: %v", out, err)
	}
	return vs
}

// AxeClean reports (t.Errorf) each serious or critical violation of the
// page.
func (b *Browser) AxeClean(axe, page string) {
	b.T.Helper()
	for _, v := range b.AxeViolations(axe) {
		b.T.Errorf("%s: %s %s: %s\n\t%s", page, v.Impact, v.ID, v.Help, strings.Join(v.Nodes, "\n\t"))
	}
}

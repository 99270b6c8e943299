package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// grafanaDashboard is the shipped dashboard.
const grafanaDashboard = "../../deploy/grafana/quarantine.json"

// promQLNames extracts the metric names an expression reads: what is left
// once label matchers, ranges, grouping clauses, strings, numbers,
// functions and aggregations (a name followed by "(") and keywords are
// taken out.
func promQLNames(expr string) []string {
	for _, re := range []*regexp.Regexp{
		regexp.MustCompile(`"(?:[^"\\]|\\.)*"`), // strings
		regexp.MustCompile(`\b\d[\w.]*`),        // numbers, durations
		regexp.MustCompile(`\{[^}]*\}`),         // label matchers
		regexp.MustCompile(`\[[^\]]*\]`),        // ranges
		regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`), // grouping
	} {
		expr = re.ReplaceAllString(expr, " ")
	}
	keywords := []string{"and", "or", "unless", "bool", "offset", "inf", "nan", "le"}
	var out []string
	for _, m := range regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*(\s*\()?`).FindAllString(expr, -1) {
		if strings.HasSuffix(m, "(") || slices.Contains(keywords, strings.ToLower(m)) || strings.HasPrefix(m, "$") {
			continue
		}
		out = append(out, m)
	}
	return out
}

func TestPromQLNames(t *testing.T) {
	t.Parallel()
	got := promQLNames(`histogram_quantile(0.95, sum by (le) (rate(a_bucket{x="{y}", q=~"$queue"}[$__rate_interval]))) and on (q) time() - b unless c offset 5m`)
	if !slices.Equal(got, []string{"a_bucket", "b", "c"}) {
		t.Fatalf("promQLNames = %q", got)
	}
}

// dashboardExprs returns every query of the dashboard: its panels'
// targets and its query variables.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(grafanaDashboard)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title      string `json:"title"`
		UID        string `json:"uid"`
		Templating struct {
			List []struct {
				Type       string `json:"type"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil || d.Title == "" || d.UID == "" {
		t.Fatalf("dashboard: %v", err)
	}
	var exprs []string
	for _, p := range d.Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			metric, _, _ := strings.Cut(strings.TrimPrefix(v.Definition, "label_values("), ",") // label_values(metric, label)
			exprs = append(exprs, metric)
		}
	}
	return exprs
}

// Every query of the Grafana dashboard names only metrics the service
// exports: each name is in a live /metrics scrape of the demo after it
// collected dead letters, replayed one and fired an alarm.
func TestGrafanaDashboardNamesExportedMetrics(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "q.yaml")
	if err := os.WriteFile(cfg, []byte(`alarms:
  - name: reports-age
    queues: [reports]
    max_age: 1s
    interval: 100ms
    receivers: [{webhook: "http://127.0.0.1:1/hook"}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	m, _, stderr := newTestMain()
	ctx := context.Background()
	if err := m.ParseFlags(ctx, []string{"demo", "--listen", "127.0.0.1:0", "--config", cfg, "--database", "sqlite:" + filepath.Join(dir, "demo.db")}); err != nil {
		t.Fatal(err)
	}
	if err := m.Run(ctx); err != nil {
		t.Fatalf("Run: %v\n%s", err, stderr)
	}
	t.Cleanup(func() { _ = m.Close() })
	urls := reLoginURL.FindStringSubmatch(stderr.String())
	if urls == nil {
		t.Fatalf("no login URL:\n%s", stderr)
	}
	admin := client{t: t, base: "http://" + m.Addr(), token: urls[1]}
	var page struct {
		Items []struct {
			ID string `json:"id"`
		} `json:"items"`
	}
	for deadline := time.Now().Add(20 * time.Second); len(page.Items) < 2; time.Sleep(50 * time.Millisecond) {
		admin.json("GET", "/api/v1/messages?queue="+demoQueue, nil, 200, &page)
		if time.Now().After(deadline) {
			t.Fatal("the demo quarantined nothing")
		}
	}
	var created struct {
		Replay struct {
			ID string `json:"id"`
		} `json:"replay"`
	}
	admin.json("POST", "/api/v1/replays", []byte(fmt.Sprintf(`{"ids":[%q],"reason":"dashboard test","canary":0}`, page.Items[0].ID)), 201, &created)
	var b struct {
		State string `json:"state"`
	}
	for deadline := time.Now().Add(20 * time.Second); b.State != "completed" && b.State != "failed"; time.Sleep(50 * time.Millisecond) {
		admin.json("GET", "/api/v1/replays/"+created.Replay.ID, nil, 200, &b)
		if time.Now().After(deadline) {
			t.Fatalf("the replay is still %s", b.State)
		}
	}

	var missing []string
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_, _, body := admin.do("GET", "/metrics", nil)
		exported := map[string]bool{}
		for _, line := range strings.Split(string(body), "\n") {
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			exported[regexp.MustCompile(`^[A-Za-z_:][A-Za-z0-9_:]*`).FindString(line)] = true
		}
		missing = missing[:0]
		n := 0
		for _, e := range dashboardExprs(t) {
			names := promQLNames(e)
			if len(names) == 0 {
				t.Errorf("query %q names no metric", e)
			}
			for _, name := range names {
				n++
				if !exported[name] {
					missing = append(missing, fmt.Sprintf("%s (in %s)", name, e))
				}
			}
		}
		if n < 12 {
			t.Fatalf("only %d metric names in the dashboard", n)
		}
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) { // the alarm's first evaluation may be a moment away
			t.Fatalf("the dashboard names metrics /metrics does not export:\n%s", strings.Join(missing, "\n"))
		}
	}
}

package main

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The tour walks the loop by itself and exits 0 only when every step's
// invariant held: one business effect per key, the duplicate absorbed,
// the audit chain verifying.
func TestDemoTour(t *testing.T) {
	t.Parallel()
	code, out, errOut := execute(t, "demo", "--tour")
	if code != 0 {
		t.Fatalf("demo --tour exited %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{"1. A producer sent 8", "dead-lettered 2", "2. The collector stored", "report:r-5",
		"3. Fixed report:r-5", "4. A dry run pinned exactly 1 message", "5. The same job delivered again",
		"report:r-8     0", "7. The audit log holds", "and verifies"} {
		if !strings.Contains(out, want) {
			t.Errorf("the tour does not say %q:\n%s", want, out)
		}
	}
	// Its server stops with it: it prints no login URL, which would not work.
	if reLoginURL.MatchString(out+errOut) || strings.Contains(out+errOut, "?token=") {
		t.Errorf("the tour printed a login URL that dies with it:\n%s\n%s", out, errOut)
	}
}

// Every start of the demo prints exactly one login URL, and it works: the
// first start on a fresh database as well as the next ones, whose earlier
// URL no longer logs in.
func TestDemoPrintsOneWorkingLoginEveryStart(t *testing.T) {
	t.Parallel()
	db := "sqlite:" + filepath.Join(t.TempDir(), "demo.db")
	var previous string
	for run := range 2 {
		m, _, stderr := newTestMain()
		ctx := context.Background()
		if err := m.ParseFlags(ctx, []string{"demo", "--listen", "127.0.0.1:0", "--database", db}); err != nil {
			t.Fatal(err)
		}
		if err := m.Run(ctx); err != nil {
			t.Fatalf("run %d: %v\n%s", run, err, stderr)
		}
		urls := reLoginURL.FindAllStringSubmatch(stderr.String(), -1)
		if len(urls) != 1 {
			_ = m.Close()
			t.Fatalf("run %d printed %d login URLs:\n%s", run, len(urls), stderr)
		}
		res, err := noRedirect.Get(urls[0][0])
		if err != nil || res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/overview" {
			_ = m.Close()
			t.Fatalf("run %d: the login URL answers %v %v", run, res, err)
		}
		_ = res.Body.Close()
		if previous != "" {
			c := client{t: t, base: "http://" + m.Addr(), token: previous}
			if code, _, _ := c.do("GET", "/api/v1/messages", nil); code != http.StatusUnauthorized {
				t.Errorf("run %d: the previous run's token still answers %d", run, code)
			}
		}
		previous = urls[0][1]
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// noRedirect is a client that shows redirects instead of following them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// The interactive demo serves, prints its login URL and quarantines the
// worker's two poison jobs by itself.
func TestDemoServes(t *testing.T) {
	t.Parallel()
	m, _, stderr := newTestMain()
	db := "sqlite:" + filepath.Join(t.TempDir(), "demo.db")
	ctx := context.Background()
	if err := m.ParseFlags(ctx, []string{"demo", "--listen", "127.0.0.1:0", "--database", db}); err != nil {
		t.Fatal(err)
	}
	if err := m.Run(ctx); err != nil {
		t.Fatalf("Run: %v\n%s", err, stderr)
	}
	t.Cleanup(func() { _ = m.Close() })
	urls := reLoginURL.FindStringSubmatch(stderr.String())
	if urls == nil || !strings.Contains(stderr.String(), "The demo is running") {
		t.Fatalf("no login URL or guide printed:\n%s", stderr)
	}
	admin := client{t: t, base: "http://" + m.Addr(), token: urls[1]}
	var page struct {
		Items []struct {
			IdempotencyKey string `json:"idempotency_key"`
			FailureClass   string `json:"failure_class"`
		} `json:"items"`
	}
	for deadline := time.Now().Add(20 * time.Second); len(page.Items) < 2; time.Sleep(50 * time.Millisecond) {
		admin.json("GET", "/api/v1/messages?queue="+demoQueue, nil, 200, &page)
		if time.Now().After(deadline) {
			b, _ := json.Marshal(page)
			t.Fatalf("the demo quarantined %s", b)
		}
	}
	for _, it := range page.Items {
		if it.FailureClass != "permanent" || (it.IdempotencyKey != "report:r-5" && it.IdempotencyKey != "report:r-8") {
			t.Errorf("unexpected quarantined job %+v", it)
		}
	}
}

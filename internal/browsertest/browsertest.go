// Package browsertest drives headless Chromium (chromedp) for the web UI's
// browser tests, in package web and in cmd/quarantine's end-to-end flow:
// one tab per test, what its pages write to the console, screenshots into
// the git-ignored tmp/web-screenshots of the module, the injection check
// of hostile strings and axe-core's accessibility check.
//
// Chromium is QUARANTINE_CHROMIUM, else Debian's /usr/bin/chromium
// (scripts/services.sh chromium installs it); axe-core is installed by
// scripts/node-tools.sh. Without them a test skips, but fails under
// CI=true.
package browsertest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/quarantine-dev/quarantine/internal/testenv"
)

// Chromium returns the browser's path, or skips t without it (fails it
// under CI=true).
func Chromium(t testing.TB) string {
	t.Helper()
	p := testenv.Lookup(testenv.Chromium)
	if p == "" {
		p = "/usr/bin/chromium" // Debian's: a binary, not a service
	}
	if _, err := os.Stat(p); err != nil {
		testenv.Unavailable(t, testenv.Chromium, fmt.Sprintf("no chromium at %s: %v", p, err))
	}
	return p
}

// Root returns the module's root folder (the first parent of the working
// directory holding go.mod).
func Root(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("browsertest: no go.mod above the working directory")
		}
		dir = parent
	}
}

// Browser is one headless Chromium tab and what its pages wrote to the
// console.
type Browser struct {
	T   *testing.T
	Ctx context.Context
	// Timeout bounds each Do and Run (default 30 s).
	Timeout time.Duration
	// Shots is the folder of the screenshots.
	Shots   string
	mu      sync.Mutex
	console []string
}

// New starts Chromium for t (stopped at its end) with the flags these
// machines need (no sandbox as root, no background networking), plus
// opts (a window size, say).
func New(t *testing.T, opts ...chromedp.ExecAllocatorOption) *Browser {
	t.Helper()
	all := []chromedp.ExecAllocatorOption{chromedp.ExecPath(Chromium(t)), chromedp.UserDataDir(t.TempDir()),
		chromedp.Headless, chromedp.NoSandbox}
	for _, f := range []string{"disable-gpu", "disable-quic", "no-first-run", "disable-background-networking",
		"disable-component-update", "disable-sync", "disable-dev-shm-usage"} {
		all = append(all, chromedp.Flag(f, true))
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), append(all, opts...)...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelA() })
	b := &Browser{T: t, Ctx: ctx, Timeout: 30 * time.Second, Shots: filepath.Join(Root(t), "tmp", "web-screenshots")}
	// Start the browser (no timeout on this first run: it would stop it).
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.console = append(b.console, m.String())
			b.mu.Unlock()
		}
	}()
	return b
}

// Do runs steps within the timeout, failing the test on an error.
func (b *Browser) Do(steps ...chromedp.Action[chromedp.Void]) {
	b.T.Helper()
	ctx, cancel := context.WithTimeout(b.Ctx, b.Timeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.T.Fatal(err)
	}
}

// Run runs a within b's timeout and returns its value, failing the test
// on an error.
func Run[T any](b *Browser, a chromedp.Action[T]) T {
	b.T.Helper()
	ctx, cancel := context.WithTimeout(b.Ctx, b.Timeout)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		b.T.Fatal(err)
	}
	return v
}

// Text is the text of the element sel (CSS) selects.
func (b *Browser) Text(sel string) string {
	b.T.Helper()
	return Run(b, chromedp.Text(chromedp.CSS(sel)))
}

// Eval evaluates js to a string.
func (b *Browser) Eval(js string) string {
	b.T.Helper()
	return Run(b, chromedp.Evaluate[string](js))
}

// WaitFor waits, within the timeout, until the JavaScript expression js
// is true on the page (the page that a click or a submit loads, say: an
// element of the old page would satisfy a selector too early).
func (b *Browser) WaitFor(js string) {
	b.T.Helper()
	deadline := time.Now().Add(b.Timeout)
	for {
		ctx, cancel := context.WithTimeout(b.Ctx, b.Timeout)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { try { return !!(`+js+`) } catch (e) { return false } })()`))
		cancel()
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			b.T.Fatalf("waited %v for %s (last error: %v)", b.Timeout, js, err)
		}
		// Poll again on the next animation frame of the page.
		_ = chromedp.Do(b.Ctx, chromedp.Evaluate[chromedp.Void](`new Promise(r => requestAnimationFrame(() => r()))`, chromedp.EvalAwaitPromise))
	}
}

// Screenshot saves the page as NAME.png in Shots.
func (b *Browser) Screenshot(name string) {
	b.T.Helper()
	png := Run(b, chromedp.FullScreenshot(100))
	if err := os.MkdirAll(b.Shots, 0o755); err != nil {
		b.T.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b.Shots, name+".png"), png, 0o644); err != nil {
		b.T.Fatal(err)
	}
}

// injected selects what no page of the UI holds of its own but a hostile
// string could make: images, SVG, frames, objects, event handlers,
// javascript: links and scripts but the static files.
const injected = `img, script:not([src^="/static/"]), svg, iframe, object, embed, [onerror], [onload], [onclick], a[href^='javascript'], a[href^=' javascript']`

// NoInjection checks that no hostile string ran (window.pwned is what
// the tests' strings set) or became an element. Pages with charts hold
// SVG of their own: check those with NoInjectionBut(page, "svg").
func (b *Browser) NoInjection(page string) { b.T.Helper(); b.NoInjectionBut(page) }

// NoInjectionBut is NoInjection, the elements that own (CSS selectors
// of the page's own SVG, say "svg.agechart") excepted.
func (b *Browser) NoInjectionBut(page string, own ...string) {
	b.T.Helper()
	if got := b.Eval(`typeof window.pwned`); got != "undefined" {
		b.T.Fatalf("%s: window.pwned is %s: a hostile string ran", page, got)
	}
	js := `[...document.querySelectorAll(` + "`" + injected + "`" + `)]`
	if len(own) > 0 {
		sel, _ := json.Marshal(strings.Join(own, ", "))
		js += `.filter(e => !e.closest(` + string(sel) + `))`
	}
	if n := Run(b, chromedp.Evaluate[int](js+`.length`)); n != 0 {
		b.T.Fatalf("%s: %d injected elements in the DOM", page, n)
	}
}

// Console returns what the pages wrote to the console since the last
// call, and forgets it.
func (b *Browser) Console() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.console
	b.console = nil
	return c
}

// NoConsole fails the test when a page wrote to the console.
func (b *Browser) NoConsole() {
	b.T.Helper()
	if c := b.Console(); len(c) > 0 {
		b.T.Fatalf("the pages wrote to the console: %q", c)
	}
}

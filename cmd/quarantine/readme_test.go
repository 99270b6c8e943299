package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine/internal/testbin"
)

// repoRoot is the checkout's root (this package is cmd/quarantine).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// quickStart returns the README's quick start: the first ```sh block of
// its "## Quick start" section.
func quickStart(t *testing.T, readme string) string {
	t.Helper()
	_, section, ok := strings.Cut(readme, "\n## Quick start\n")
	if !ok {
		t.Fatal("README.md has no \"## Quick start\" section")
	}
	_, block, ok := strings.Cut(section, "\n```sh\n")
	if !ok {
		t.Fatal("the quick start has no ```sh block")
	}
	block, _, ok = strings.Cut(block, "\n```\n")
	if !ok {
		t.Fatal("the quick start's ```sh block does not end")
	}
	return block
}

// The README's quick start, pasted as one block into bash in an empty
// directory, runs to its end: the ingest stores the envelope, the list
// shows it, the audit chain verifies, and the printed URL signs a browser
// in to the web UI of the server it left running. Only two things differ
// from a user's paste: `make build` is the test's build of the binary
// (copied to bin/quarantine), and the address is a free port instead of
// 127.0.0.1:8080 (which another test, or a user's server, may hold).
func TestReadmeQuickStartRuns(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	block := quickStart(t, string(readme))
	if !strings.HasPrefix(block, "make build\n") {
		t.Fatalf("the quick start no longer starts with make build:\n%s", block)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	block = strings.ReplaceAll(block, "127.0.0.1:8080", addr)
	bin := testbin.Path(t)
	dir := t.TempDir()
	script := "make() { mkdir -p bin && cp " + shellQuote(bin) + " bin/quarantine; }\n" +
		"export QUARANTINE_LISTEN=" + addr + "\n" +
		block + "\n" +
		"echo QUICKSTART-DONE\n" +
		"read -r _\nkill $SERVER\nwait $SERVER\n"

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "QUARANTINE_CONFIG=", "QUARANTINE_DATABASE_URL=")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("the quick start's shell: %v\n%s", err, stderr.String())
		}
	}()

	var out strings.Builder
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		if lines.Text() == "QUICKSTART-DONE" {
			break
		}
		out.WriteString(lines.Text() + "\n")
	}
	printed := out.String()
	for _, want := range []string{`"stored":1`, `"status":"quarantined"`, `"ok":true`} {
		if !strings.Contains(printed, want) {
			t.Errorf("the quick start printed no %s:\n%s\nstderr:\n%s", want, printed, stderr.String())
		}
	}
	m := regexp.MustCompile(`Web UI: (http://\S+/\?token=qt_\S+)`).FindStringSubmatch(printed)
	if m == nil {
		t.Fatalf("the quick start printed no sign-in URL:\n%s", printed)
	}

	// The URL signs a browser in: it lands on a page of the UI, with a
	// session cookie, and the token leaves the address.
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	res, err := client.Get(m[1])
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || strings.Contains(res.Request.URL.RawQuery, "token=") {
		t.Fatalf("the sign-in URL ended at %s with %d:\n%.500s", res.Request.URL, res.StatusCode, body)
	}
	u, _ := url.Parse(m[1])
	if len(jar.Cookies(u)) == 0 {
		t.Fatalf("the sign-in URL set no session cookie")
	}
	if !strings.Contains(string(body), "payments.charges") {
		t.Errorf("the page after signing in does not show the ingested queue:\n%.2000s", body)
	}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// markdownLink matches [text](target) outside code; images too.
var markdownLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// Every relative link of the README and of docs/ resolves: the file
// exists, and a #fragment names a heading of the target (GitHub's
// anchors: lower case, punctuation dropped, spaces as hyphens).
func TestDocsLinksResolve(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, filepath.Join(root, "README.md"))
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		a := map[string]bool{}
		if b, err := os.ReadFile(path); err == nil {
			inCode := false
			for _, line := range strings.Split(string(b), "\n") {
				if strings.HasPrefix(line, "```") {
					inCode = !inCode
				}
				if !inCode && strings.HasPrefix(line, "#") {
					a[slug(strings.TrimLeft(line, "#"))] = true
				}
			}
		}
		anchors[path] = a
		return a
	}
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		inCode := false
		for n, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "```") {
				inCode = !inCode
			}
			if inCode || strings.HasPrefix(line, "    ") {
				continue
			}
			for _, m := range markdownLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, frag, _ := strings.Cut(target, "#")
				path := page
				if file != "" {
					path = filepath.Join(filepath.Dir(page), file)
				}
				rel, _ := filepath.Rel(root, page)
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s:%d: link %s: %v", rel, n+1, target, err)
					continue
				}
				if frag != "" && strings.HasSuffix(path, ".md") && !anchorsOf(path)[frag] {
					t.Errorf("%s:%d: link %s: no heading with anchor #%s", rel, n+1, target, frag)
				}
			}
		}
	}
}

// slug is GitHub's anchor of a heading.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

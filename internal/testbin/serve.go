package testbin

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Process is one `quarantine serve` run of the built binary.
type Process struct {
	Cmd *exec.Cmd
	// Addr is the address it serves on (host:port), from its log.
	Addr string
	// Token is the admin token it printed at its first start ("" when
	// the database already had one).
	Token string

	out  *SyncBuffer
	done chan error
}

var (
	servingRe = regexp.MustCompile(`msg=serving .*?addr=(\S+)`)
	tokenRe   = regexp.MustCompile(`Bearer (qt_[A-Za-z0-9_\-]+)'`)
)

// Serve starts `quarantine serve --config config` (and more args, like
// --migrate) and waits until it serves (at most 60 s), failing tb
// otherwise. The process is killed when the test ends.
func Serve(tb testing.TB, bin, config string, args ...string) *Process {
	tb.Helper()
	return serve(tb, bin, config, nil, args...)
}

// serve is Serve with an environment (nil: this process's).
func serve(tb testing.TB, bin, config string, env []string, args ...string) *Process {
	tb.Helper()
	p := &Process{out: &SyncBuffer{}, done: make(chan error, 1)}
	p.Cmd = exec.Command(bin, append([]string{"serve", "--config", config}, args...)...)
	p.Cmd.Env = env
	p.Cmd.Stdout, p.Cmd.Stderr = p.out, p.out
	if err := p.Cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	go func() { p.done <- p.Cmd.Wait() }()
	tb.Cleanup(func() { p.Kill() })
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		out := p.out.String()
		if m := servingRe.FindStringSubmatch(out); m != nil {
			p.Addr = m[1]
			if t := tokenRe.FindStringSubmatch(out); t != nil {
				p.Token = t[1]
			}
			return p
		}
		if p.Exited(0) || time.Now().After(deadline) {
			tb.Fatalf("quarantine serve did not start:\n%s", out)
		}
	}
}

// Output returns what the process wrote so far.
func (p *Process) Output() string { return p.out.String() }

// Exited reports whether the process ended within d.
func (p *Process) Exited(d time.Duration) bool {
	select {
	case err := <-p.done:
		p.done <- err
		return true
	case <-time.After(d):
		return false
	}
}

// Kill sends SIGKILL and waits for the end.
func (p *Process) Kill() {
	_ = p.Cmd.Process.Signal(syscall.SIGKILL)
	p.Exited(10 * time.Second)
}

// Signal sends sig (SIGSTOP, SIGCONT, SIGTERM…).
func (p *Process) Signal(tb testing.TB, sig syscall.Signal) {
	tb.Helper()
	if err := p.Cmd.Process.Signal(sig); err != nil {
		tb.Fatal(err)
	}
}

// API is a small JSON client of a running service, as a user's script
// would call it.
type API struct {
	Base  string // http://host:port
	Token string
}

// API returns a client of p with token.
func (p *Process) API(token string) API { return API{Base: "http://" + p.Addr, Token: token} }

// Do sends body (nil for none) as JSON and decodes a JSON answer into
// out (when not nil). It returns the status and the raw answer.
func (a API) Do(tb testing.TB, method, path string, body, out any) (int, []byte) {
	tb.Helper()
	return a.DoHeaders(tb, method, path, nil, body, out)
}

// DoHeaders is Do with more request headers (If-Match…).
func (a API) DoHeaders(tb testing.TB, method, path string, headers map[string]string, body, out any) (int, []byte) {
	tb.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			tb.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, a.Base+path, rd)
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+a.Token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(raw, out); err != nil {
			tb.Fatalf("%s %s: %v in %s", method, path, err, raw)
		}
	}
	return resp.StatusCode, raw
}

// MustDo is Do failing tb unless the status is want.
func (a API) MustDo(tb testing.TB, want int, method, path string, body, out any) []byte {
	tb.Helper()
	st, raw := a.Do(tb, method, path, body, out)
	if st != want {
		tb.Fatalf("%s %s: status %d, want %d: %s", method, path, st, want, raw)
	}
	return raw
}

// SyncBuffer is a bytes.Buffer safe for a writer and readers at once: a
// child process's output, read while it runs.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

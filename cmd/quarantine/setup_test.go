package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for the server's goroutines to write.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// newTestMain returns a Main with captured output and an empty environment,
// so that the developer's QUARANTINE_* variables never leak into a test.
func newTestMain() (*Main, *syncBuffer, *syncBuffer) {
	var stdout, stderr syncBuffer
	m := NewMain()
	m.Stdout, m.Stderr = &stdout, &stderr
	m.Getenv = func(string) string { return "" }
	return m, &stdout, &stderr
}

// execute runs one command line to completion, as main would, and returns
// the exit status and the output.
func execute(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	m, out, errw := newTestMain()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code = Execute(ctx, m, args)
	return code, out.String(), errw.String()
}

// serve boots the real service through Main on 127.0.0.1:0 and closes it
// when the test ends (or earlier, through the returned stop).
func serve(t *testing.T, args ...string) (m *Main, stderr *syncBuffer, stop func()) {
	t.Helper()
	m, _, stderr = newTestMain()
	args = append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)
	ctx := context.Background()
	if err := m.ParseFlags(ctx, args); err != nil {
		t.Fatalf("ParseFlags(%q): %v", args, err)
	}
	if err := m.Run(ctx); err != nil {
		_ = m.Close()
		t.Fatalf("Run: %v\nstderr:\n%s", err, stderr)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			if err := m.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return m, stderr, stop
}

// client calls one server with one token.
type client struct {
	t     *testing.T
	base  string
	token string
}

// do sends a request and returns the status, the content type and the body.
func (c client) do(method, path string, body []byte) (int, string, []byte) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), b
}

// json sends a request that must answer want, and decodes the body into v.
func (c client) json(method, path string, body []byte, want int, v any) {
	c.t.Helper()
	status, _, b := c.do(method, path, body)
	if status != want {
		c.t.Fatalf("%s %s: status %d, want %d: %s", method, path, status, want, b)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			c.t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
}

// countOf counts the occurrences of sub in s.
func countOf(s, sub string) int { return strings.Count(s, sub) }

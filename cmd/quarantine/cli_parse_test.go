package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiclient "github.com/quarantine-dev/quarantine/client"
)

// The server and the token come from the flag, else the environment,
// else the CLI config file; the server defaults to serve's address.
func TestCLI_ServerAndTokenResolution(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	file := filepath.Join(home, ".config", "quarantine", "cli.yaml")
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("server: https://file.example.com/\ntoken: qt_file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "other.yaml")
	if err := os.WriteFile(other, []byte("server: other:9000\ntoken: qt_other\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name          string
		env           map[string]string
		args          []string
		server, token string
	}{
		{"the file in HOME", map[string]string{"HOME": home}, nil, "https://file.example.com", "qt_file"},
		{"XDG_CONFIG_HOME first", map[string]string{"HOME": "/nonexistent", "XDG_CONFIG_HOME": filepath.Join(home, ".config")}, nil, "https://file.example.com", "qt_file"},
		{"the environment over the file", map[string]string{"HOME": home, EnvServer: "10.0.0.1:8080", EnvToken: "qt_env"}, nil, "http://10.0.0.1:8080", "qt_env"},
		{"flags over the environment", map[string]string{"HOME": home, EnvServer: "10.0.0.1:8080", EnvToken: "qt_env"},
			[]string{"--server", "https://flag.example.com", "--token", "qt_flag"}, "https://flag.example.com", "qt_flag"},
		{"a named file", map[string]string{"HOME": home, EnvCLIConfig: other}, nil, "http://other:9000", "qt_other"},
		{"--cli-config over the variable", map[string]string{EnvCLIConfig: "/nonexistent.yaml"}, []string{"--cli-config", other}, "http://other:9000", "qt_other"},
		{"the default server", map[string]string{EnvToken: "qt_env"}, nil, "http://127.0.0.1:8080", "qt_env"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, _, _ := newTestMain()
			m.Getenv = envOf(tc.env)
			if err := m.ParseFlags(context.Background(), append([]string{"alarms", "list"}, tc.args...)); err != nil {
				t.Fatal(err)
			}
			if m.cli.server != tc.server || m.cli.token.Reveal() != tc.token {
				t.Fatalf("server %q token %q, want %q %q", m.cli.server, m.cli.token.Reveal(), tc.server, tc.token)
			}
		})
	}
}

func TestCLI_CommandLineErrors(t *testing.T) {
	t.Parallel()
	bad := filepath.Join(t.TempDir(), "cli.yaml")
	if err := os.WriteFile(bad, []byte("server: x\ntokn: qt_x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	withToken := map[string]string{EnvToken: "qt_x"}
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		code int
		want string
	}{
		{"no token", nil, []string{"messages", "list"}, 2, "no API token: pass --token, set QUARANTINE_TOKEN"},
		{"an unknown key in the file", map[string]string{EnvCLIConfig: bad}, []string{"messages", "list"}, 1, "tokn"},
		{"a named file missing", map[string]string{EnvCLIConfig: "/nonexistent/cli.yaml"}, []string{"alarms", "list"}, 1, "/nonexistent/cli.yaml"},
		{"a bad server", withToken, []string{"alarms", "list", "--server", "ftp://x"}, 2, "is not a server URL"},
		{"messages alone", withToken, []string{"messages"}, 2, "needs a subcommand: list, show, edit, discard"},
		{"replay frob", withToken, []string{"replay", "frob"}, 2, `unknown replay subcommand "frob" (one of: create, start`},
		{"show without an id", withToken, []string{"messages", "show"}, 2, "missing ID"},
		{"show with two ids", withToken, []string{"messages", "show", "A", "B"}, 2, `unexpected argument "B"`},
		{"edit without a payload", withToken, []string{"messages", "edit", "A", "--reason", "r"}, 2, "--payload-file is required"},
		{"pause without a reason", withToken, []string{"replay", "pause", "A"}, 2, "--reason is required"},
		{"ids and a filter", withToken, []string{"replay", "create", "A", "--queue", "q", "--reason", "r"}, 2, "IDs or filter flags, not both"},
		{"a bad time", withToken, []string{"messages", "list", "--failed_after", "yesterday"}, 2, "RFC 3339"},
		{"a bad limit", withToken, []string{"messages", "list", "--limit", "0"}, 2, "--limit must be 1 to 1000"},
		{"an unreachable server", withToken, []string{"alarms", "list", "--server", "127.0.0.1:1"}, 1, "cannot reach the server at 127.0.0.1:1"},
		{"--token without --server", nil, []string{"audit", "verify", "--token", "qt_x"}, 2, "go with --server"},
		{"help", nil, []string{"replay", "create", "-h"}, 0, "asks\nto type that count"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, out, errOut := newTestMain()
			m.Getenv = envOf(tc.env)
			code := Execute(context.Background(), m, tc.args)
			if code != tc.code || !strings.Contains(errOut.String(), tc.want) {
				t.Fatalf("exit %d (want %d), stderr %q (want %q), stdout %q", code, tc.code, errOut, tc.want, out)
			}
		})
	}
}

// Flags may follow the positional arguments; after -- all are positional.
func TestParseInterspersed(t *testing.T) {
	t.Parallel()
	m, _, _ := newTestMain()
	m.Getenv = envOf(map[string]string{EnvToken: "qt_x"})
	if err := m.ParseFlags(context.Background(), []string{"messages", "discard", "A", "--reason", "r", "B", "--", "--C"}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(m.cli.args, " "); got != "A B --C" || m.cli.reason != "r" {
		t.Fatalf("args %q, reason %q", got, m.cli.reason)
	}
}

// A JSON payload is sent as written (not re-encoded by encoding/json,
// which would compact it and escape <, > and &); other bytes in base64.
func TestEditBody(t *testing.T) {
	t.Parallel()
	pretty := "{\n  \"html\": \"<b>&</b>\",\n  \"n\": 1.50\n}"
	var got struct {
		Payload       json.RawMessage `json:"payload"`
		PayloadBase64 []byte          `json:"payload_base64"`
		ContentType   *string         `json:"content_type"`
		Reason        string          `json:"reason"`
	}
	if err := json.Unmarshal(editBody([]byte(pretty+"\n"), true, "", `fix "n"`), &got); err != nil {
		t.Fatal(err)
	}
	if string(got.Payload) != pretty || got.PayloadBase64 != nil || got.ContentType != nil || got.Reason != `fix "n"` {
		t.Fatalf("JSON edit body: %+v", got)
	}
	got.Payload = nil
	bin := []byte{0, 0xff, '\n'}
	if err := json.Unmarshal(editBody(bin, false, "application/octet-stream", "r"), &got); err != nil {
		t.Fatal(err)
	}
	if got.Payload != nil || string(got.PayloadBase64) != string(bin) || *got.ContentType != "application/octet-stream" {
		t.Fatalf("binary edit body: %+v", got)
	}
	// Not JSON although the type says so: base64, and the server decides.
	got.PayloadBase64 = nil
	if err := json.Unmarshal(editBody([]byte("{oops"), true, "", "r"), &got); err != nil || string(got.PayloadBase64) != "{oops" {
		t.Fatalf("invalid JSON: %+v %v", got, err)
	}
}

// Text from the server cannot drive the terminal.
func TestSafe(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"card declined":           "card declined",
		"\x1b[31mred\x1b[0m":      `\x1b[31mred\x1b[0m`,
		"a\rb\nc\td":              `a\x0db\x0ac\x09d`,
		"over\u202eride":          `over\u202eride`,
		"c1\u009bx":               `c1\x9bx`,
		"überlauf ✓":              "überlauf ✓",
		"bell\a":                  `bell\x07`,
		string([]byte{0xff, 'x'}): "\ufffdx",
	} {
		if got := safe(in); got != want {
			t.Errorf("safe(%q) = %q, want %q", in, got, want)
		}
	}
	if got := safeLines("a\nb\x1b"); got != "a\nb\\x1b" {
		t.Errorf("safeLines keeps newlines only: %q", got)
	}
}

// The dry run's undeliverable messages, in the shapes a server may give.
func TestUndeliverableOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		body    string
		n       int
		reasons string
		ok      bool
	}{
		{`{"replay":{"id":"x"}}`, 0, "", false},
		{`{"undeliverable":3}`, 3, "", true},
		{`{"replay":{"undeliverable":2}}`, 2, "", true},
		{`{"undeliverable":[{"id":"a","reason":"no destination"},{"id":"b","reason":"no destination"},{"id":"c","reason":"no key"}]}`, 3, "no destination: 2, no key: 1", true},
		{`{"undeliverable":{"count":4,"by_reason":{"no destination":3,"unknown collector":1}}}`, 4, "no destination: 3, unknown collector: 1", true},
		{`{"undeliverable":{"count":1,"items":[{"reason":"no key"}]}}`, 1, "no key: 1", true},
		{`{"undeliverable":{"count":0,"reasons":[]}}`, 0, "", true},
	} {
		n, reasons, ok := undeliverableOf([]byte(tc.body))
		if n != tc.n || ok != tc.ok || tally(reasons) != tc.reasons {
			t.Errorf("%s: %d %q %v, want %d %q %v", tc.body, n, tally(reasons), ok, tc.n, tc.reasons, tc.ok)
		}
	}
}

func TestProgressLine(t *testing.T) {
	t.Parallel()
	rate, eta := float32(19.84), float32(2.2)
	b := &apiclient.ReplayBatch{State: "running", Total: 40, AchievedRate: &rate, EtaSeconds: &eta, CanaryVerdict: "passed",
		Counts: apiclient.ReplayCounts{Pending: 30, Published: 8, Failed: 1, Skipped: 1}}
	want := "running [██████████░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░] 10/40  25%  19.8 msg/s  ETA 3s  1 FAILED  canary passed"
	if got := progressLine(b, 120); got != want {
		t.Errorf("on a terminal:\n%s\nwant\n%s", got, want)
	}
	if got := progressLine(b, 0); got != "running 10/40  25%  19.8 msg/s  ETA 3s  1 FAILED  canary passed  published=8 deduplicated=0 skipped=1 failed=1 refailed=0" {
		t.Errorf("plain: %s", got)
	}
	if got := progressLine(b, 40); len([]rune(got)) > 39 || !strings.HasPrefix(got, "running  10/40") {
		t.Errorf("a narrow terminal gets no bar and a clipped line: %q", got)
	}
	b.State, b.StateReason = "paused", "the downstream is slow"
	if got := progressLine(b, 0); !strings.HasSuffix(got, ": the downstream is slow") {
		t.Errorf("paused: %s", got)
	}
}

package main

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestExecute_CommandLine(t *testing.T) {
	t.Parallel()
	db := "sqlite:" + filepath.Join(t.TempDir(), "q.db")
	for _, tc := range []struct {
		name      string
		args      []string
		code      int
		stdout    string // substring; "" means stdout must be empty
		stderrHas string
	}{
		{"top help", []string{"-h"}, 0, "", "Usage:"},
		{"help word", []string{"help"}, 0, "", "token create"},
		{"serve help", []string{"serve", "-h"}, 0, "", "-migrate"},
		{"token help", []string{"token", "create", "-h"}, 0, "", "-owner"},
		{"audit help", []string{"audit", "verify", "--help"}, 0, "", "-head-hash"},
		{"migrate help", []string{"migrate", "-h"}, 0, "", "-database"},
		{"version", []string{"version"}, 0, "quarantine ", ""},
		{"unknown command", []string{"frobnicate"}, 2, "", `unknown command "frobnicate"`},
		{"unknown flag", []string{"serve", "--frob"}, 2, "", "-frob"},
		{"unknown flag, no command", []string{"--frob"}, 2, "", "-frob"},
		{"flag of another command", []string{"migrate", "--listen", "127.0.0.1:1"}, 2, "", "-listen"},
		{"stray argument", []string{"migrate", "extra"}, 2, "", `unexpected argument "extra"`},
		{"token alone", []string{"token"}, 2, "", "needs a subcommand: create"},
		{"token list", []string{"token", "list"}, 2, "", `unknown token subcommand "list"`},
		{"audit alone", []string{"audit"}, 2, "", "verify"},
		{"token without name", []string{"token", "create", "--role", "admin"}, 2, "", "--name is required"},
		{"token without role", []string{"token", "create", "--name", "x"}, 2, "", "--role is required"},
		{"token bad role", []string{"token", "create", "--name", "x", "--role", "root"}, 2, "", `unknown role "root"`},
		{"head seq alone", []string{"audit", "verify", "--head-seq", "3"}, 2, "", "go together"},
		{"head hash malformed", []string{"audit", "verify", "--head-seq", "3", "--head-hash", "xyz"}, 2, "", "64 lowercase hex"},
		{"bad listen flag", []string{"serve", "--listen", "nope"}, 1, "", `--listen (listen): "nope" is not host:port`},
		{"bad database flag", []string{"migrate", "--database", "mysql://u:hunter2@h/db"}, 1, "", "unsupported database URL"},
		{"missing config", []string{"migrate", "--config", "/nonexistent/q.yaml"}, 1, "", "/nonexistent/q.yaml"},
		{"migrate", []string{"migrate", "--database", db}, 0, "schema at version", ""},
		{"audit verify, empty log", []string{"audit", "verify", "--database", db}, 0, `"ok": true`, ""},
		{"token with owners", []string{"token", "create", "--database", db, "--name", "pay", "--role", "viewer", "--owner", "payments", "--owner", "billing"}, 0, "qt_", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := execute(t, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stdout %q stderr %q", code, tc.code, out, errOut)
			}
			if tc.stdout == "" && out != "" || !strings.Contains(out, tc.stdout) {
				t.Fatalf("stdout %q, want %q", out, tc.stdout)
			}
			if !strings.Contains(errOut, tc.stderrHas) {
				t.Fatalf("stderr %q does not contain %q", errOut, tc.stderrHas)
			}
			if strings.Contains(errOut+out, "hunter2") {
				t.Fatal("a password was printed")
			}
		})
	}
}

func TestExecute_HeadNotOnChain(t *testing.T) {
	t.Parallel()
	db := "sqlite:" + filepath.Join(t.TempDir(), "q.db")
	if code, _, errOut := execute(t, "token", "create", "--database", db, "--name", "a", "--role", "admin"); code != 0 {
		t.Fatalf("token create: %d %s", code, errOut)
	}
	// A head the service never reported: the chain is one event long.
	code, out, _ := execute(t, "audit", "verify", "--database", db, "--head-seq", "5", "--head-hash", strings.Repeat("a", 64))
	if code != 1 || !strings.Contains(out, `"ok": false`) {
		t.Fatalf("exit %d, stdout %s: a head beyond the chain must fail", code, out)
	}
}

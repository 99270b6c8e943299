package client_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGeneratedUpToDate regenerates the client from openapi.yaml with the
// oapi-codegen pinned in go.mod and fails on any difference from the
// checked-in client.gen.go: the spec cannot change without the client, and
// the spec must stay one that oapi-codegen generates.
func TestGeneratedUpToDate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := filepath.Join(dir, "client.gen.go")
	cfg, err := os.ReadFile("oapi-codegen.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The same configuration, writing into dir.
	cfg = bytes.Replace(cfg, []byte("\noutput: client.gen.go\n"), []byte("\noutput: "+out+"\n"), 1)
	if !bytes.Contains(cfg, []byte(out)) {
		t.Fatal("oapi-codegen.yaml has no line output: client.gen.go")
	}
	if err := os.WriteFile(filepath.Join(dir, "oapi-codegen.yaml"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), "go", "tool", "oapi-codegen", "-config", filepath.Join(dir, "oapi-codegen.yaml"), "../openapi.yaml")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("oapi-codegen on openapi.yaml: %v\n%s", err, b)
	}
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("client.gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		line := 1 + bytes.Count(got[:firstDiff(got, want)], []byte("\n"))
		t.Fatalf("client.gen.go differs from what openapi.yaml generates (from line %d): run go generate ./client", line)
	}
}

func firstDiff(a, b []byte) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

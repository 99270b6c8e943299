// Package testbin gives tests the quarantine binary, for the tests that
// must run the service as a separate process (to SIGKILL it mid-drain).
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// EnvBinary names a prebuilt quarantine binary to use instead of building
// ./cmd/quarantine.
const EnvBinary = "QUARANTINE_TEST_BINARY"

var (
	once  sync.Once
	built string
	err   error
)

// Path returns $QUARANTINE_TEST_BINARY, or builds ./cmd/quarantine once
// per test process into a temporary directory (Remove deletes it), with
// the profiling hook when EnvCPUProfile is set. A binary that does not
// build fails the test.
func Path(tb testing.TB) string {
	tb.Helper()
	if p := os.Getenv(EnvBinary); p != "" {
		return p
	}
	once.Do(func() {
		var out []byte
		out, err = exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			return
		}
		root := filepath.Dir(strings.TrimSpace(string(out)))
		var dir string
		if dir, err = os.MkdirTemp("", "quarantine-bin-"); err != nil {
			return
		}
		built = filepath.Join(dir, "quarantine")
		args := []string{"build", "-o", built}
		if os.Getenv(EnvCPUProfile) != "" {
			var overlay string
			if overlay, err = Overlay(dir, filepath.Join(root, "cmd", "quarantine")); err != nil {
				return
			}
			args = append(args, "-overlay", overlay)
		}
		cmd := exec.Command("go", append(args, "./cmd/quarantine")...)
		cmd.Dir = root
		if out, berr := cmd.CombinedOutput(); berr != nil {
			err = fmt.Errorf("go build ./cmd/quarantine: %v\n%s", berr, out)
		}
	})
	if err != nil {
		tb.Fatalf("cannot build the quarantine binary: %v", err)
	}
	return built
}

// Remove deletes the binary Path built, if any. Call it from TestMain
// after m.Run.
func Remove() {
	if built != "" {
		_ = os.RemoveAll(filepath.Dir(built))
	}
}

package testbin

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// EnvCPUProfile names a folder. When it is set, Path builds the binary
// with a profiling hook (a file added to package main by a build overlay,
// so that the shipped binary has none), and Drain writes there a CPU
// profile of each drain, from the collector's first consume until every
// message is stored, named after the binary's folder and name and the
// drain's number:
//
//	QUARANTINE_BENCH_CPUPROFILE=/tmp/prof go test -run '^$' -bench BinaryVsBareDrain -benchtime=1x ./broker/rabbitmq/
//	go tool pprof -top /tmp/prof/*-quarantine-1.pprof
//
// A binary given by QUARANTINE_TEST_BINARY or a benchmark's list of
// binaries has the hook only when it was built with Overlay.
const EnvCPUProfile = "QUARANTINE_BENCH_CPUPROFILE"

// envHookProfile tells the hook where to write its profile.
const envHookProfile = "QUARANTINE_TESTBIN_CPUPROFILE"

// profileHook is the file the overlay adds to package main: with
// $QUARANTINE_TESTBIN_CPUPROFILE set, the first SIGUSR1 starts a CPU
// profile and the second writes it to that path (through a rename, so
// that a reader never sees half a profile).
const profileHook = `package main

import (
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
)

func init() {
	path := os.Getenv("` + envHookProfile + `")
	if path == "" {
		return
	}
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGUSR1)
	go func() {
		<-sig
		f, err := os.Create(path + ".part")
		if err != nil {
			return
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return
		}
		<-sig
		pprof.StopCPUProfile()
		if f.Close() == nil {
			_ = os.Rename(path+".part", path)
		}
	}()
}
`

// Overlay writes, into dir, the profiling hook and a `go build -overlay`
// file adding it to the package main in mainDir (an absolute path to
// cmd/quarantine), and returns the overlay file's path:
//
//	go build -overlay "$(overlay)" -o quarantine ./cmd/quarantine
func Overlay(dir, mainDir string) (string, error) {
	hook := filepath.Join(dir, "cpuprofile_hook.go")
	if err := os.WriteFile(hook, []byte(profileHook), 0o644); err != nil {
		return "", err
	}
	b, err := json.Marshal(map[string]map[string]string{
		"Replace": {filepath.Join(mainDir, "zz_testbin_cpuprofile.go"): hook},
	})
	if err != nil {
		return "", err
	}
	overlay := filepath.Join(dir, "overlay.json")
	return overlay, os.WriteFile(overlay, b, 0o644)
}

var profiles atomic.Int64

// profiler is the CPU profile of one drain, or nothing.
type profiler struct {
	path string
}

// newProfiler returns where the drain of bin writes its profile, and the
// environment that tells the hook (nil and no path when EnvCPUProfile is
// not set).
func newProfiler(tb testing.TB, bin string) (profiler, []string) {
	dir := os.Getenv(EnvCPUProfile)
	if dir == "" {
		return profiler{}, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	// Binaries of one name (before/quarantine, after/quarantine) are
	// told apart by their folder.
	name := filepath.Base(filepath.Dir(bin)) + "-" + filepath.Base(bin)
	path := filepath.Join(dir, fmt.Sprintf("%s-%d.pprof", name, profiles.Add(1)))
	_ = os.Remove(path)
	return profiler{path}, append(os.Environ(), envHookProfile+"="+path)
}

// toggle starts, then stops the profile of p.
func (pr profiler) toggle(tb testing.TB, p *Process) {
	if pr.path != "" {
		p.Signal(tb, syscall.SIGUSR1)
	}
}

// wait waits until the profile is written (at most 10 s).
func (pr profiler) wait(tb testing.TB) {
	if pr.path == "" {
		return
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(pr.path); err == nil {
			tb.Logf("CPU profile of the drain: %s", pr.path)
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("no CPU profile at %s: was the binary built with testbin.Overlay?", pr.path)
		}
	}
}

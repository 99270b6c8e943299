package procstat

import (
	"os"
	"runtime"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	t.Parallel()
	// A command name with a space and a parenthesis, as a process may set.
	line := []byte("4242 (pg (x) y) S 1 4242 4242 0 -1 4194304 100 0 0 0 150 25 7 3 20 0 1 0 99 1000 10 18446744073709551615\n")
	got, ok := parseStat(line)
	if !ok || got != (150+25+7+3)*tick {
		t.Fatalf("parseStat = %v, %v; want %v", got, ok, (150+25+7+3)*tick)
	}
	for _, bad := range []string{"", "1 (x", "1 (x) S 1 2 3", "1 (x) S 1 2 3 4 5 6 7 8 9 10 11 a b c d e"} {
		if _, ok := parseStat([]byte(bad)); ok {
			t.Fatalf("parseStat(%q) accepted", bad)
		}
	}
}

// TestCPUSeesThisProcess burns CPU in this process and reads it back.
func TestCPUSeesThisProcess(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc is Linux's")
	}
	comm, err := os.ReadFile("/proc/self/comm")
	if err != nil {
		t.Fatal(err)
	}
	name := string(comm[:len(comm)-1])
	before, ok := CPU(name)
	if !ok {
		t.Fatalf("no process named %q", name)
	}
	// Spin until the kernel's own account of this process (getrusage)
	// says 300 ms of CPU were used, however loaded the machine is: a wall
	// clock says nothing of the CPU a spinning loop got.
	self0 := selfCPU()
	x := 0
	for deadline := time.Now().Add(time.Minute); selfCPU()-self0 < 300*time.Millisecond; x++ {
		if time.Now().After(deadline) {
			t.Fatalf("getrusage saw %v of CPU in a minute of spinning", selfCPU()-self0)
		}
		for i := 0; i < 100000; i++ {
			x++
		}
	}
	burned := selfCPU() - self0
	after, _ := CPU(name)
	// /proc counts in clock ticks (10 ms), and reads a little behind.
	if d := after - before; d < burned-50*time.Millisecond {
		t.Fatalf("%v of spinning (getrusage) read as %v of CPU (x=%d)", burned, d, x)
	}
}

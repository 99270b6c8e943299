package scripts_test

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestServicesGoawsLoopbackAndStop starts goaws through services.sh on
// free ports in a copy of scripts/: it listens on 127.0.0.1 only (goaws's
// own main listens on every interface); a second run reuses the running
// instance; an instance on another port (a port override) gets a record
// of its own instead of overwriting the first one's; `services.sh stop`
// in another copy (which started nothing) leaves both running; and
// `services.sh stop` in the copy that started them stops both and leaves
// no record.
func TestServicesGoawsLoopbackAndStop(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go is not on PATH")
	}
	port, port2 := freePort(t), freePort(t)
	ours, other := copyScripts(t), copyScripts(t)
	run := func(root string, env []string, args ...string) string {
		t.Helper()
		cmd := exec.Command(filepath.Join(root, "scripts", "services.sh"), args...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("services.sh %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	first := []string{fmt.Sprintf("GOAWS_PORT=%d", port)}
	second := []string{fmt.Sprintf("QUARANTINE_GOAWS_PORT=%d", port2)}
	t.Cleanup(func() {
		cmd := exec.Command(filepath.Join(ours, "scripts", "services.sh"), "stop", "goaws")
		_ = cmd.Run()
	})
	run(ours, first, "goaws")
	pid := recordedPid(t, ours, "goaws", port)

	addrs := listeners(t, port)
	if len(addrs) == 0 {
		t.Fatalf("nothing listens on port %d after services.sh goaws", port)
	}
	for _, a := range addrs {
		if a != "127.0.0.1" {
			t.Fatalf("goaws listens on %v, want 127.0.0.1 only", addrs)
		}
	}
	if env := readFile(t, filepath.Join(ours, ".tools", "services", "env")); !strings.Contains(env, fmt.Sprintf("QUARANTINE_TEST_SQS_ENDPOINT=http://127.0.0.1:%d\n", port)) {
		t.Fatalf("the env file does not point at the instance:\n%s", env)
	}

	if out := run(ours, first, "goaws"); !strings.Contains(out, "reused") {
		t.Fatalf("a second run did not reuse the instance: %s", out)
	}
	if again := recordedPid(t, ours, "goaws", port); again != pid {
		t.Fatalf("a second run replaced process %s with %s", pid, again)
	}

	run(ours, second, "goaws")
	if recordedPid(t, ours, "goaws", port) != pid || len(listeners(t, port2)) == 0 {
		t.Fatalf("the instance on port %d overwrote the record of the one on %d, or did not start", port2, port)
	}

	if out := run(other, nil, "stop", "goaws"); !strings.Contains(out, "not started by this script") {
		t.Fatalf("stop in a copy that started nothing: %s", out)
	}
	if len(listeners(t, port)) == 0 || len(listeners(t, port2)) == 0 {
		t.Fatal("stop in a copy that started nothing stopped goaws")
	}

	run(ours, nil, "stop", "goaws")
	for _, p := range []int{port, port2} {
		deadline := time.Now().Add(10 * time.Second)
		for len(listeners(t, p)) > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("goaws still listens on %d after services.sh stop", p)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if _, err := os.Stat(filepath.Join(ours, ".tools", "services", fmt.Sprintf("goaws-%d", p), "started")); !os.IsNotExist(err) {
			t.Fatalf("the record of the goaws on %d is still there: %v", p, err)
		}
	}
	if env := readFile(t, filepath.Join(ours, ".tools", "services", "env")); strings.Contains(env, "SQS") {
		t.Fatalf("the env file still names a stopped instance:\n%s", env)
	}
}

// recordedPid is the pid services.sh recorded for the instance of name on
// port.
func recordedPid(t *testing.T, root, name string, port int) string {
	t.Helper()
	pid, _, _ := strings.Cut(readFile(t, filepath.Join(root, ".tools", "services", fmt.Sprintf("%s-%d", name, port), "started")), " ")
	return pid
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// copyScripts copies scripts/ (services.sh, services.d, goaws) into a new
// root, so that the script's .tools/ state is the test's own.
func copyScripts(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	if err := os.CopyFS(filepath.Join(root, "scripts"), os.DirFS(".")); err != nil {
		t.Fatal(err)
	}
	return root
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// listeners lists the local addresses of the TCP sockets listening on
// port, from /proc/net/tcp and tcp6 ("::" and "0.0.0.0" for every
// interface).
func listeners(t *testing.T, port int) []string {
	t.Helper()
	var out []string
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		fh, err := os.Open(f)
		if err != nil {
			if os.IsNotExist(err) {
				continue
			}
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 4 || fields[3] != "0A" { // 0A: LISTEN
				continue
			}
			hostHex, portHex, ok := strings.Cut(fields[1], ":")
			if !ok {
				continue
			}
			p, err := strconv.ParseUint(portHex, 16, 16)
			if err != nil || int(p) != port {
				continue
			}
			out = append(out, hexIP(hostHex))
		}
		fh.Close()
	}
	return out
}

// hexIP decodes /proc/net/tcp's address: 32-bit words in host (little
// endian) order.
func hexIP(h string) string {
	b := make(net.IP, 0, len(h)/2)
	for i := 0; i+8 <= len(h); i += 8 {
		w, _ := strconv.ParseUint(h[i:i+8], 16, 32)
		b = append(b, byte(w), byte(w>>8), byte(w>>16), byte(w>>24))
	}
	return b.String()
}

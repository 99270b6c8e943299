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

// TestServicesGoawsLoopbackAndStop starts goaws through services.sh on a
// free port in a copy of scripts/: it listens on 127.0.0.1 only (goaws's
// own main listens on every interface), `services.sh stop` in another
// copy (which started nothing) leaves it running, and `services.sh stop`
// in the copy that started it stops it.
func TestServicesGoawsLoopbackAndStop(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go is not on PATH")
	}
	port := freePort(t)
	ours, other := copyScripts(t), copyScripts(t)
	env := append(os.Environ(), fmt.Sprintf("GOAWS_PORT=%d", port))
	run := func(root string, args ...string) string {
		t.Helper()
		cmd := exec.Command(filepath.Join(root, "scripts", "services.sh"), args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("services.sh %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	t.Cleanup(func() {
		cmd := exec.Command(filepath.Join(ours, "scripts", "services.sh"), "stop", "goaws")
		cmd.Env = env
		_ = cmd.Run()
	})
	run(ours, "goaws")

	addrs := listeners(t, port)
	if len(addrs) == 0 {
		t.Fatalf("nothing listens on port %d after services.sh goaws", port)
	}
	for _, a := range addrs {
		if a != "127.0.0.1" {
			t.Fatalf("goaws listens on %v, want 127.0.0.1 only", addrs)
		}
	}

	if out := run(other, "stop", "goaws"); !strings.Contains(out, "not started by this script") {
		t.Fatalf("stop in a copy that started nothing: %s", out)
	}
	if len(listeners(t, port)) == 0 {
		t.Fatal("stop in a copy that started nothing stopped goaws")
	}

	run(ours, "stop", "goaws")
	deadline := time.Now().Add(10 * time.Second)
	for len(listeners(t, port)) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("goaws still listens after services.sh stop")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := os.Stat(filepath.Join(ours, ".tools", "services", "goaws.started")); !os.IsNotExist(err) {
		t.Fatalf("the record of the started goaws is still there: %v", err)
	}
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

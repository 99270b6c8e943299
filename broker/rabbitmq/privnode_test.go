package rabbitmq

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// privateNode is a RabbitMQ node of the test's own, on its own ports and
// data folder, so that a test may stop and start it without disturbing
// the shared broker (SERVICES.md, "A private RabbitMQ node").
type privateNode struct {
	t    testing.TB
	name string // NAME@localhost
	url  string
	env  []string
}

// freePort returns a loopback port nothing listens on now.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startPrivateNode starts a private node and stops it when the test ends.
// Without root, rabbitmq-server or a rabbitmq user it skips, or fails
// under CI=true.
func startPrivateNode(t testing.TB) *privateNode {
	t.Helper()
	skip := t.Skipf
	if os.Getenv("CI") == "true" {
		skip = t.Fatalf
	}
	if os.Geteuid() != 0 {
		skip("a private RabbitMQ node needs root (it runs as the rabbitmq user)")
	}
	if _, err := exec.LookPath("rabbitmq-server"); err != nil {
		skip("rabbitmq-server is not installed: %v", err)
	}
	u, err := user.Lookup("rabbitmq")
	if err != nil {
		skip("no rabbitmq user: %v", err)
	}
	dir, err := os.MkdirTemp("", "qt-rabbit-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	port, dist := freePort(t), freePort(t)
	files := map[string]string{
		"rabbitmq.conf":     fmt.Sprintf("listeners.tcp.local = 127.0.0.1:%d\n", port),
		"plugins":           "[].\n",
		"rabbitmq-env.conf": "",
		"advanced.config":   "[].\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command("chown", "-R", u.Username+":", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("chown %s: %v\n%s", dir, err, out)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	n := &privateNode{t: t, name: fmt.Sprintf("qt%d@localhost", port), url: fmt.Sprintf("amqp://guest:guest@127.0.0.1:%d/", port)}
	n.env = append(os.Environ(),
		"RABBITMQ_NODENAME="+n.name, fmt.Sprintf("RABBITMQ_DIST_PORT=%d", dist),
		"RABBITMQ_MNESIA_BASE="+filepath.Join(dir, "mnesia"), "RABBITMQ_LOG_BASE="+filepath.Join(dir, "log"),
		"RABBITMQ_PID_FILE="+filepath.Join(dir, "pid"), "RABBITMQ_ENABLED_PLUGINS_FILE="+filepath.Join(dir, "plugins"),
		"RABBITMQ_CONFIG_FILE="+filepath.Join(dir, "rabbitmq.conf"),
		"RABBITMQ_CONF_ENV_FILE="+filepath.Join(dir, "rabbitmq-env.conf"),
		"RABBITMQ_ADVANCED_CONFIG_FILE="+filepath.Join(dir, "advanced.config"))
	n.env = append(n.env, ctlVars()...)
	cmd := exec.Command("rabbitmq-server", "-detached")
	cmd.Env = n.env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("rabbitmq-server -detached: %v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = n.ctl("stop") })
	n.awaitStartup()
	return n
}

// ctl runs rabbitmqctl against the node.
func (n *privateNode) ctl(args ...string) (string, error) {
	cmd := exec.Command("rabbitmqctl", append([]string{"-n", n.name, "-q"}, args...)...)
	cmd.Env = n.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// mustCtl runs rabbitmqctl and fails the test on an error.
func (n *privateNode) mustCtl(args ...string) {
	n.t.Helper()
	if out, err := n.ctl(args...); err != nil {
		n.t.Fatalf("rabbitmqctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// awaitStartup waits until the node answers (rabbitmqctl exits 69 until
// it registered).
func (n *privateNode) awaitStartup() {
	n.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, err := n.ctl("await_startup", "--timeout", "10")
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("the private RabbitMQ node %s did not start: %v\n%s", n.name, err, out)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

package cluster

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine/internal/testbin"
	"github.com/quarantine-dev/quarantine/internal/testenv"
)

// freePort returns a loopback port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// balancer is an HAProxy of the test's own: round robin over the
// instances, each checked on /readyz every 100 ms (one failed check
// takes it out), a refused connection retried on another instance
// (redispatch), and one log line per request on its stdout.
type balancer struct {
	URL string // http://127.0.0.1:PORT
	out *testbin.SyncBuffer
}

// haproxyConfig is the balancer's configuration: the port it listens
// on, then one server line per instance.
const haproxyConfig = `global
	log stdout format raw local0
	maxconn 512
defaults
	mode http
	log global
	timeout connect 2s
	timeout client 60s
	timeout server 60s
	timeout check 1s
	retries 3
	option redispatch 1
frontend quarantine
	bind 127.0.0.1:%d
	capture request header User-Agent len 64
	log-format "lb server=%%s status=%%ST method=%%HM uri=%%HU ua=%%hr"
	default_backend instances
backend instances
	balance roundrobin
	option httpchk GET /readyz
	default-server check inter 100ms fall 1 rise 2
%s`

// startBalancer runs HAProxy in the foreground in front of addrs (named
// q0, q1…) until the test ends, and waits until it forwards.
func startBalancer(t *testing.T, addrs []string) *balancer {
	t.Helper()
	bin := testenv.Binary(t, testenv.HAProxy, "haproxy")
	var servers strings.Builder
	for i, a := range addrs {
		fmt.Fprintf(&servers, "\tserver q%d %s\n", i, a)
	}
	port := freePort(t)
	cfg := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(haproxyConfig, port, servers.String())), 0o600); err != nil {
		t.Fatal(err)
	}
	b := &balancer{URL: fmt.Sprintf("http://127.0.0.1:%d", port), out: &testbin.SyncBuffer{}}
	cmd := exec.Command(bin, "-f", cfg, "-db") // -db: foreground, no daemon
	cmd.Stdout, cmd.Stderr = b.out, b.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	// Ready when every instance has served a request through it.
	for deadline := time.Now().Add(30 * time.Second); len(b.servers(func(r request) bool { return r.status == 200 })) < len(addrs); {
		select {
		case <-done:
			t.Fatalf("haproxy exited:\n%s", b.out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("haproxy did not reach every instance in 30 s:\n%s", b.out.String())
		}
		if resp, err := http.Get(b.URL + "/healthz"); err == nil {
			resp.Body.Close()
		}
	}
	return b
}

// request is one request the balancer logged.
type request struct {
	server, method, uri, agent string
	status                     int
	seq                        int // its place in the log, from 0
}

var requestRe = regexp.MustCompile(`(?m)^lb server=(\S+) status=(-?\d+) method=(\S+) uri=(\S+) ua=\{([^}]*)\}`)

// requests returns what the balancer logged so far, in order.
func (b *balancer) requests() []request {
	var out []request
	for i, m := range requestRe.FindAllStringSubmatch(b.out.String(), -1) {
		st, _ := strconv.Atoi(m[2])
		out = append(out, request{server: m[1], status: st, method: m[3], uri: m[4], agent: m[5], seq: i})
	}
	return out
}

// servers counts, by instance, the logged requests keep selects.
func (b *balancer) servers(keep func(request) bool) map[string]int {
	out := map[string]int{}
	for _, r := range b.requests() {
		if keep(r) {
			out[r.server]++
		}
	}
	return out
}

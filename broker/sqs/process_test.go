package sqs

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/testbin"
	"github.com/quarantine-dev/quarantine/store/sqlite"
)

// serveProcess is one `quarantine serve` run.
type serveProcess struct {
	cmd  *exec.Cmd
	done chan error
	log  string
}

func startServe(t *testing.T, bin, config, logPath string) *serveProcess {
	t.Helper()
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, "serve", "--config", config, "--migrate")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &serveProcess{cmd: cmd, done: make(chan error, 1), log: logPath}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	return p
}

// exitedEarly reports whether the process ended within d, and its log.
func (p *serveProcess) exitedEarly(d time.Duration) (bool, string) {
	select {
	case <-p.done:
		p.done <- nil
		b, _ := os.ReadFile(p.log)
		return true, string(b)
	case <-time.After(d):
		return false, ""
	}
}

func (p *serveProcess) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	p.done <- nil
}

// TestSIGKILLMidDrainLosesAndDuplicatesNothing kills the collector process
// with SIGKILL again and again while it drains (between commit and ack
// among other points), restarts it each time, and checks that every
// message ends up stored exactly once and the queue empty. The visibility
// timeout is short so that what a killed process held comes back quickly.
func TestSIGKILLMidDrainLosesAndDuplicatesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the quarantine binary")
	}
	t.Parallel()
	const n = 10000
	e := newEnv(t)
	_, url := e.queue("sigkill", map[string]string{"VisibilityTimeout": "2"})
	ids := e.send(url, bodies(n, "sigkill"), nil)
	bin := testbin.Path(t)

	dir := t.TempDir()
	dbPath := filepath.Join(dir, "q.db")
	config := filepath.Join(dir, "quarantine.yaml")
	yaml := fmt.Sprintf(`database: sqlite:%s
listen: 127.0.0.1:0
log: {level: warn}
collectors:
  - name: dlq-sigkill
    kind: sqs
    batch_size: 100
    linger: 20ms
    region: us-east-1
    endpoint: %s
    protocol: query
    queue_url: %s
    source_queue: jobs
    wait_time: 1s
    visibility_timeout: 2s
`, dbPath, e.endpoint, url)
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "serve.log")

	killedMidDrain := 0
	// A kill counts when the queue still held messages, visible or in
	// flight (received by the process, perhaps committed, not deleted).
	for round := 0; round < 8 && e.held(url) > 0; round++ {
		p := startServe(t, bin, config, logPath)
		if exited, log := p.exitedEarly(time.Duration(100+rand.IntN(500)) * time.Millisecond); exited {
			t.Fatalf("quarantine serve exited by itself:\n%s", log)
		}
		if e.held(url) > 0 {
			killedMidDrain++
		}
		p.kill()
	}
	if killedMidDrain < 2 {
		t.Fatalf("only %d kills landed while the queue still held messages: the test did not exercise a crash", killedMidDrain)
	}

	// A last run drains the rest, then stops gracefully.
	p := startServe(t, bin, config, logPath)
	eventually(t, 90*time.Second, "the queue to drain", func() bool { return e.depth(url) == 0 })
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		p.done <- nil
	case <-time.After(30 * time.Second):
		t.Fatal("quarantine serve did not stop on SIGTERM")
	}

	st, err := sqlite.Open(context.Background(), dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	msgs := allMessages(t, st, false)
	exactlyOnce(t, msgs, ids, func(m *quarantine.Message) string { return m.MessageID })
	t.Logf("%d kills mid-drain; %d messages stored once each", killedMidDrain, len(msgs))
}

// TestMain removes the binary that testbin.Path built.
func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Remove()
	os.Exit(code)
}

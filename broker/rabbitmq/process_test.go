package rabbitmq

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

// collectorProcess is one `quarantine serve` run.
type collectorProcess struct {
	cmd    *exec.Cmd
	stderr *testbin.SyncBuffer // its output, read while it runs
	done   chan error
}

func startProcess(t testing.TB, bin, config string) *collectorProcess {
	t.Helper()
	p := &collectorProcess{stderr: &testbin.SyncBuffer{}, done: make(chan error, 1)}
	p.cmd = exec.Command(bin, "serve", "--config", config)
	p.cmd.Stdout, p.cmd.Stderr = p.stderr, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() { _ = p.cmd.Process.Kill() })
	return p
}

// exited reports whether the process ended within d.
func (p *collectorProcess) exited(d time.Duration) bool {
	select {
	case err := <-p.done:
		p.done <- err
		return true
	case <-time.After(d):
		return false
	}
}

// SIGKILL of the collector process mid-drain, repeatedly, then a restart:
// every message stored exactly once and nothing left in the failure queue.
// The kills land anywhere, sometimes after a commit and before its ack;
// the redelivery is then deduplicated.
func TestCollectorProcessSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the quarantine binary")
	}
	t.Parallel()
	const n, kills = 12000, 10
	b := newBroker(t)
	dlq := b.failureQueue(nil)
	published := numbered("kill", n, nil)
	b.publish(dlq, published...)
	bin := testbin.Path(t)

	dir := t.TempDir()
	db := filepath.Join(dir, "q.db")
	config := filepath.Join(dir, "quarantine.yaml")
	yaml := fmt.Sprintf(`database: "sqlite:%s"
listen: 127.0.0.1:0
collectors:
  - name: killme
    kind: rabbitmq
    url: %q
    queue: %q
    batch_size: 25
    linger: 5ms
`, db, testURL(), dlq)
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}

	// count is polled while the process collects: a count per queue, on
	// a store without a search indexer of its own. Listing every stored
	// message, with an indexer folding what the process stored, took
	// about a core of this 2-core machine from the process under test.
	count := func() int { // 0 until a process migrated the database to the latest version
		if _, err := os.Stat(db); err != nil {
			return 0
		}
		st, err := sqlite.Open(context.Background(), db, sqlite.WithoutSearchIndexer())
		if err != nil {
			return 0
		}
		defer st.Close()
		// Nothing is stored before the last migration: one under way (or
		// cut by a kill) leaves the schema short of the columns a count reads.
		if cur, latest, err := st.SchemaVersion(context.Background()); err != nil || cur < latest {
			return 0
		}
		qs, err := st.CountByQueue(context.Background(), quarantine.Filter{Source: []string{"killme"}})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, q := range qs {
			n += int(q.Count)
		}
		return n
	}
	inWindow := 0
	for i := 0; i < kills; i++ {
		p := startProcess(t, bin, config)
		if p.exited(time.Duration(150+rand.IntN(300)) * time.Millisecond) {
			t.Fatalf("quarantine serve exited early:\n%s", p.stderr.String())
		}
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		p.exited(10 * time.Second)
		// The broker requeues what the dead process held: stored plus
		// ready above n means a kill landed between a commit and its ack.
		time.Sleep(100 * time.Millisecond)
		c, ready := count(), b.depth(dlq)
		if c+ready > n {
			inWindow++
		}
		t.Logf("kill %d: %d stored, %d ready", i+1, c, ready)
		if c == n {
			break
		}
	}

	p := startProcess(t, bin, config)
	for deadline := time.Now().Add(60 * time.Second); count() < n; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) || p.exited(0) {
			t.Fatalf("stored %d of %d; process output:\n%s", count(), n, p.stderr.String())
		}
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if !p.exited(30 * time.Second) {
		t.Fatal("quarantine serve did not stop on SIGTERM")
	}
	b.waitDepth(dlq, 0)
	st, err := sqlite.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	exactlyOnce(t, st, "killme", bodiesOf(published))
	t.Logf("%d kills left committed but unacknowledged messages to redeliver", inWindow)
}

// TestMain removes the binary that testbin.Path built.
func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Remove()
	os.Exit(code)
}

package nats

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarantine-dev/quarantine/internal/testbin"
	"github.com/quarantine-dev/quarantine/store/sqlite"
)

// TestMain removes the binary that testbin.Path built.
func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Remove()
	os.Exit(code)
}

// process is one run of `quarantine serve`.
type process struct {
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	exited chan struct{}
}

func startProcess(t *testing.T, bin, config string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(bin, "serve", "--config", config), stderr: &bytes.Buffer{}, exited: make(chan struct{})}
	p.cmd.Stderr = &lockedWriter{w: p.stderr}
	p.cmd.Stdout = p.cmd.Stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.exited
	})
	return p
}

func (p *process) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// delivered returns the last stream sequence the consumer delivered: it
// grows as a collector takes new batches.
func delivered(js jetstream.JetStream, stream, consumer string) uint64 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := js.Consumer(ctx, stream, consumer)
	if err != nil {
		return 0
	}
	return c.CachedInfo().Delivered.Stream
}

// writeConfig writes a quarantine.yaml with one nats collector whose
// broker keys are keys (YAML lines, indented by four spaces).
func writeConfig(t *testing.T, db, keys string) string {
	t.Helper()
	config := filepath.Join(t.TempDir(), "quarantine.yaml")
	yaml := fmt.Sprintf("database: sqlite:%s\nlisten: 127.0.0.1:0\n"+
		"idempotency:\n  - queues: [\"*\"]\n    header: X-Idempotency-Key\ncollectors:\n  - name: killed\n    kind: nats\n"+
		"    batch_size: 20\n    linger: 5ms\n    ack_wait: 2s\n%s", db, keys)
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return config
}

// killRepeatedly runs the binary and kills it with SIGKILL a few
// milliseconds after each new batch was delivered to it (progress grows),
// again and again, until progress reaches total; then it runs it once more
// until done holds and stops it with SIGTERM. It returns the number of
// kills.
func killRepeatedly(t *testing.T, bin, config string, progress func() uint64, total uint64, done func() bool) int {
	t.Helper()
	kills := 0
	for round := range 8 {
		before := progress()
		if before >= total {
			break
		}
		p := startProcess(t, bin, config)
		deadline := time.Now().Add(patience * 60 * time.Second)
		for progress() <= before && p.running() {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: no progress; output:\n%s", round, p.stderr)
			}
			time.Sleep(5 * time.Millisecond)
		}
		if !p.running() {
			t.Fatalf("round %d: the process exited:\n%s", round, p.stderr.String())
		}
		time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-p.exited
		kills++
	}
	// The last run takes what is left, redeliveries of the killed runs'
	// unacknowledged batches included.
	p := startProcess(t, bin, config)
	eventually(t, 90*time.Second, "the drain finished", done)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("the process did not stop on SIGTERM:\n%s", p.stderr)
	}
	return kills
}

func openProcessStore(t *testing.T, db string) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// TestSIGKILLCollectorProcess kills the collector process (the quarantine
// binary) with SIGKILL again and again in the middle of a drain, at random
// points between receive, commit and acknowledgement, and restarts it: in
// the end every message is stored exactly once and nothing is left
// unacknowledged.
func TestSIGKILLCollectorProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the quarantine binary")
	}
	t.Parallel()
	bin := testbin.Path(t)
	srv := startEmbedded(t)
	_, js := jsClient(t, srv.url())

	t.Run("failure stream", func(t *testing.T) {
		t.Parallel()
		stream := uniq("KILL")
		newStream(t, js, jetstream.StreamConfig{Name: stream, Storage: jetstream.FileStorage})
		const n = 10000
		publishEnvelopes(t, js, stream+".jobs", "billing", 0, n)
		db := filepath.Join(t.TempDir(), "q.db")
		config := writeConfig(t, db, fmt.Sprintf("    url: %s\n    stream: %s\n", srv.url(), stream))
		const consumer = "quarantine-killed"
		kills := killRepeatedly(t, bin, config, func() uint64 { return delivered(js, stream, consumer) }, n,
			func() bool { return consumerDrained(t, js, stream, consumer) })
		assertEnvelopesOnce(t, openProcessStore(t, db), "killed", "billing", n)
		c, err := js.Consumer(context.Background(), stream, consumer)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d kills; %d deliveries for %d messages", kills, c.CachedInfo().Delivered.Consumer, n)
		if kills < 3 {
			t.Fatalf("the drain ended after %d kills", kills)
		}
	})

	// Advisories: a kill between the acknowledgement of an advisory and the
	// delete of its message, or between the delete and anything else, must
	// neither duplicate a job nor report it lost.
	t.Run("advisories", func(t *testing.T) {
		t.Parallel()
		stream := workerStream(t, js, 2)
		capture := captureStreamName(stream, "worker")
		newStream(t, js, jetstream.StreamConfig{Name: capture, Retention: jetstream.WorkQueuePolicy,
			Subjects: []string{AdvisorySubject(stream, "worker")}})
		const n = 800
		publishJobs(t, js, stream, 0, n)
		work(t, js, stream, never)
		db := filepath.Join(t.TempDir(), "q.db")
		config := writeConfig(t, db, fmt.Sprintf("    url: %s\n    advisories: {stream: %s, consumer: worker}\n"+
			"    delete_after_store: true\n    reconcile_every: 1s\n", srv.url(), stream))
		const consumer = "quarantine-killed"
		kills := killRepeatedly(t, bin, config, func() uint64 { return delivered(js, capture, consumer) }, n,
			func() bool { return streamMsgs(t, js, stream) == 0 && streamMsgs(t, js, capture) == 0 })
		st := openProcessStore(t, db)
		all := make([]int, n)
		for i := range all {
			all[i] = i
		}
		assertJobsOnce(t, st, "killed", stream, all, "")
		if evs := lostEvents(t, st); len(evs) != 0 {
			t.Fatalf("%d lost events, first %+v", len(evs), evs[0])
		}
		t.Logf("%d kills", kills)
		if kills < 3 {
			t.Fatalf("the drain ended after %d kills", kills)
		}
	})
}

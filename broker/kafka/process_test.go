package kafka

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

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/quarantine-dev/quarantine/internal/testbin"
	"github.com/quarantine-dev/quarantine/store/sqlite"
)

// TestMain removes the binary that testbin.Path built.
func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Remove()
	os.Exit(code)
}

type process struct {
	cmd    *exec.Cmd
	stderr *lockedBuffer
	exited chan struct{}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startProcess starts `quarantine serve` with config, in this process's
// environment plus env (NAME=value).
func startProcess(t *testing.T, bin, config string, env ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(bin, "serve", "--config", config), stderr: &lockedBuffer{}, exited: make(chan struct{})}
	if len(env) > 0 {
		p.cmd.Env = append(os.Environ(), env...)
	}
	p.cmd.Stderr, p.cmd.Stdout = p.stderr, p.stderr
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

// committed is the sum of the group's committed offsets on topic.
func (k *cluster) committed(group, topic string) int64 {
	adm := k.admin()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return 0
	}
	var n int64
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic {
			n += o.At
		}
	})
	return n
}

// TestSIGKILLCollectorProcess kills `quarantine serve` with SIGKILL again
// and again in the middle of draining a dead-letter topic, just after a
// commit of offsets and at random points after it, and restarts it: in the
// end every record is stored exactly once and the group's offsets reach
// the end of the topic.
func TestSIGKILLCollectorProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the quarantine binary")
	}
	t.Parallel()
	bin := testbin.Path(t)
	const topic, n = "orders.DLT", 3000
	k := newCluster(t, 3, topic)
	var rs []*kgo.Record
	for i := range n {
		rs = append(rs, springRecord(topic, "orders", int32(i%3), int64(i), []byte(fmt.Sprint("k", i%11)),
			[]byte(fmt.Sprintf(`{"i":%d}`, i)), time.UnixMilli(1_700_000_000_000+int64(i)), "java.lang.RuntimeException", "boom"))
	}
	k.produce(rs...)
	db := filepath.Join(t.TempDir(), "q.db")
	config := filepath.Join(t.TempDir(), "quarantine.yaml")
	yaml := fmt.Sprintf("database: sqlite:%s\nlisten: 127.0.0.1:0\ncollectors:\n  - name: killed\n    kind: kafka\n"+
		"    batch_size: 50\n    linger: 5ms\n    brokers: [%s]\n    topics: [%s]\n    session_timeout: 6s\n", db, k.addrs[0], topic)
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	kills := 0
	for round := range 4 {
		before := k.committed(DefaultGroup, topic)
		if before >= n {
			break
		}
		p := startProcess(t, bin, config)
		deadline := time.Now().Add(patience * 60 * time.Second)
		for k.committed(DefaultGroup, topic) <= before && p.running() {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: no progress; output:\n%s", round, p.stderr)
			}
			time.Sleep(5 * time.Millisecond)
		}
		if !p.running() {
			t.Fatalf("round %d: the process exited:\n%s", round, p.stderr)
		}
		time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-p.exited
		kills++
	}
	p := startProcess(t, bin, config)
	eventually(t, 90*time.Second, "the drain finished", func() bool { return k.committedLag(DefaultGroup, topic) == 0 })
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("the process did not stop on SIGTERM:\n%s", p.stderr)
	}
	st, err := sqlite.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ms := allMessages(t, st, "killed")
	seen := map[string]bool{}
	for _, m := range ms {
		if seen[m.MessageID] {
			t.Fatalf("record %s stored twice", m.MessageID)
		}
		seen[m.MessageID] = true
	}
	if len(ms) != n {
		t.Fatalf("%d records stored after %d kills, want %d", len(ms), kills, n)
	}
	t.Logf("%d kills", kills)
	if kills < 2 {
		t.Fatalf("the drain ended after %d kills", kills)
	}
}

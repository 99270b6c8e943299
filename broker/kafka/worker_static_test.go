package kafka

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// envWorkChild carries the WorkConfig (JSON) of a worker child process.
const envWorkChild = "QUARANTINE_KAFKA_WORK_CHILD"

// TestWorkDriverChild is not a test of its own: run again as a child
// process by TestWorkDriverStaticMemberRestartAfterKill, it runs a
// WorkDriver configured by $QUARANTINE_KAFKA_WORK_CHILD and prints
// "delivered BODY" and, once the ack returned, "acked BODY" for each
// delivery, until it is killed.
func TestWorkDriverChild(t *testing.T) {
	raw := os.Getenv(envWorkChild)
	if raw == "" {
		t.Skip("a child process of TestWorkDriverStaticMemberRestartAfterKill")
	}
	var cfg WorkConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		t.Fatal(err)
	}
	d, err := NewWorkDriver(cfg, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for {
		ds, err := d.Receive(ctx, 10)
		if err != nil {
			fmt.Println("error", err)
			continue
		}
		for _, x := range ds {
			fmt.Println("delivered", string(x.Body))
			if err := d.Ack(ctx, x); err != nil {
				t.Fatal(err)
			}
			fmt.Println("acked", string(x.Body))
		}
	}
}

// workChild is a worker child process and the lines it prints.
type workChild struct {
	cmd    *exec.Cmd
	lines  chan string
	exited chan struct{}
}

func startWorkChild(t *testing.T, cfg WorkConfig) *workChild {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := &workChild{cmd: exec.Command(os.Args[0], "-test.run=^TestWorkDriverChild$"), lines: make(chan string, 100), exited: make(chan struct{})}
	c.cmd.Env = append(os.Environ(), envWorkChild+"="+string(raw))
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		_ = c.cmd.Wait()
		close(c.exited)
	}()
	t.Cleanup(func() {
		_ = c.cmd.Process.Kill()
		<-c.exited
	})
	return c
}

// next returns the child's next "delivered" or "acked" line, failing the
// test after within or when the child exits.
func (c *workChild) next(t *testing.T, within time.Duration) string {
	t.Helper()
	timeout := time.After(within)
	for {
		select {
		case l := <-c.lines:
			if strings.HasPrefix(l, "delivered ") || strings.HasPrefix(l, "acked ") {
				return l
			}
			t.Logf("child: %s", l)
		case <-c.exited:
			t.Fatalf("the worker process exited")
		case <-timeout:
			t.Fatalf("the worker process printed nothing for %s", within)
		}
	}
}

func (c *workChild) kill(t *testing.T) {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-c.exited
}

// TestWorkDriverStaticMemberRestartAfterKill kills a worker process
// (SIGKILL: it cannot leave the group) after it acked a job and starts it
// again. With an InstanceID the restarted driver is the same static
// member (KIP-345): it gets the next job well before the session
// timeout. Without one (the control) the group waits for the killed
// member's session to expire first. Either way the acked job is not
// delivered again.
func TestWorkDriverStaticMemberRestartAfterKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills worker processes")
	}
	t.Parallel()
	const session = 12 * time.Second
	for _, tc := range []struct{ name, instanceID string }{{"static", "worker-1"}, {"dynamic", ""}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newWorkEnv(t)
			cfg := e.config()
			cfg.SessionTimeout, cfg.InstanceID = session, tc.instanceID
			e.k.produce(&kgo.Record{Topic: workTopic, Value: []byte("A")})
			first := startWorkChild(t, cfg)
			for _, want := range []string{"delivered A", "acked A"} {
				if l := first.next(t, patience*30*time.Second); l != want {
					t.Fatalf("the first worker printed %q, want %q", l, want)
				}
			}
			first.kill(t)
			killed := time.Now()
			e.k.produce(&kgo.Record{Topic: workTopic, Value: []byte("B")})

			again := startWorkChild(t, cfg)
			if l := again.next(t, 3*session); l != "delivered B" {
				t.Fatalf("the restarted worker printed %q first, want %q (A was acked before the kill)", l, "delivered B")
			}
			back := time.Since(killed)
			t.Logf("the restarted worker got the next job %s after the kill (session timeout %s)", back, session)
			if tc.instanceID != "" {
				if back > session/3 {
					t.Errorf("the static member got the next job %s after the kill, want well before the session timeout %s", back, session)
				}
				if ids := e.k.describeMembers("worker-" + workTopic); len(ids) != 1 || ids[0] != tc.instanceID {
					t.Errorf("group members' instance ids %q, want [%q]", ids, tc.instanceID)
				}
			} else if back < session*2/3 {
				// The control: without an instance id the group waits
				// for the killed member's session. If it did not, the
				// static arm would prove nothing.
				t.Errorf("a dynamic member got the next job %s after the kill, before the session timeout %s: the test cannot tell static membership", back, session)
			}
			if l := again.next(t, 10*time.Second); l != "acked B" {
				t.Fatalf("the restarted worker printed %q, want %q", l, "acked B")
			}
			eventually(t, 10*time.Second, "offsets committed", e.drained)
		})
	}
}

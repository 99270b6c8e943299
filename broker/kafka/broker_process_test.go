package kafka

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// envBrokerChild makes the test binary a kfake broker process
// (TestKfakeBrokerProcess) with this many partitions per topic.
const envBrokerChild = "QUARANTINE_KAFKA_BROKER_CHILD"

// TestKfakeBrokerProcess is not a test of its own: run again as a child
// process by newClusterProcess, it serves a kfake cluster, prints its
// addresses on a line "addrs A,B,…", and exits when its standard input
// closes (the parent went).
func TestKfakeBrokerProcess(t *testing.T) {
	partitions := os.Getenv(envBrokerChild)
	if partitions == "" {
		t.Skip("a child process of newClusterProcess")
	}
	var p int
	if _, err := fmt.Sscan(partitions, &p); err != nil {
		t.Fatal(err)
	}
	c, err := kfake.NewCluster(kfake.Ports(0), kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(p))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Println("addrs", strings.Join(c.ListenAddrs(), ","))
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// newClusterProcess is newCluster with the broker in a process of its own
// (the test binary again): the CPU it uses is neither the benchmark's
// process's nor any drain's, and pid() tells it apart. The helpers that
// need the in-process *kfake.Cluster (k.c) cannot be used.
func newClusterProcess(tb testing.TB, partitions int32) (*cluster, *exec.Cmd) {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKfakeBrokerProcess$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", envBrokerChild, partitions))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	addrs := make(chan []string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "addrs "); ok {
				addrs <- strings.Split(a, ",")
			}
		}
	}()
	select {
	case a := <-addrs:
		return &cluster{tb: tb, addrs: a}, cmd
	case <-time.After(30 * time.Second):
		tb.Fatal("the kfake process printed no addresses in 30 s")
	}
	return nil, nil
}

// The broker process serves the helpers (topics, produce, consume).
func TestClusterProcess(t *testing.T) {
	t.Parallel()
	k, cmd := newClusterProcess(t, 2)
	const topic = "orders.DLT"
	if _, err := k.admin().CreateTopic(context.Background(), 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	k.produce(&kgo.Record{Topic: topic, Value: []byte("a")}, &kgo.Record{Topic: topic, Value: []byte("b")})
	if rs := k.consume(topic, 2); len(rs) != 2 {
		t.Fatalf("%d records read back", len(rs))
	}
	if cmd.Process.Pid == os.Getpid() {
		t.Fatal("the broker is not a process of its own")
	}
}

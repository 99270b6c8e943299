package rabbitmq

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine/internal/pgtest"
	"github.com/quarantine-dev/quarantine/internal/testbin"
)

// consumer takes every message of a queue as it arrives, noting when,
// and how long this process went unscheduled meanwhile.
type consumer struct {
	mu     sync.Mutex
	got    []replayedMsg
	stalls *testbin.Stalls
}

func (b *testBroker) consumeAll(queue string) *consumer {
	b.t.Helper()
	ch, err := b.conn.Channel()
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(func() { _ = ch.Close() })
	ds, err := ch.Consume(queue, "", true, false, false, false, nil)
	if err != nil {
		b.t.Fatal(err)
	}
	c := &consumer{stalls: testbin.MeasureStalls(b.t, 2*time.Millisecond)}
	go func() {
		for m := range ds {
			c.mu.Lock()
			c.got = append(c.got, replayedMsg{string(m.Body), m.Headers, m.MessageId, m.ContentType, time.Now()})
			c.mu.Unlock()
		}
	}()
	return c
}

// longestStall is the longest the process went unscheduled so far.
func (c *consumer) longestStall() time.Duration { return c.stalls.Longest() }

func (c *consumer) messages() []replayedMsg {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]replayedMsg(nil), c.got...)
}

// waitFor waits until the consumer holds n messages.
func (c *consumer) waitFor(t *testing.T, n int, within time.Duration) []replayedMsg {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(20 * time.Millisecond) {
		got := c.messages()
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("the work queue got %d of %d messages", len(got), n)
		}
	}
}

// maxPerWindow is the most arrivals within any window of length w.
func maxPerWindow(ms []replayedMsg, w time.Duration) int {
	at := make([]time.Time, len(ms))
	for i, m := range ms {
		at[i] = m.at
	}
	return testbin.MaxInWindow(at, w)
}

// twoProcesses starts two services on one PostgreSQL schema, each with a
// collector on dlq, and returns them (the first one's admin token works
// for both).
func twoProcesses(t *testing.T, dlq, work, extra string) (a, b *testbin.Process, token string) {
	t.Helper()
	dir := t.TempDir()
	config := filepath.Join(dir, "quarantine.yaml")
	yaml := fmt.Sprintf(`database: %q
listen: 127.0.0.1:0
collectors:
  - name: orders
    kind: rabbitmq
    url: %q
    queue: %q
idempotency:
  - queues: [%q]
    header: x-idempotency-key
%s`, pgtest.URL(t), testURL(), dlq, work, extra)
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := testbin.Path(t)
	a = testbin.Serve(t, bin, config, "--migrate")
	b = testbin.Serve(t, bin, config)
	return a, b, a.Token
}

// staleRe finds the engine's log lines for results it published but did
// not record: refused because their lease was lost, or not written
// because the database ended the session (a process stopped inside its
// record transaction, past the idle-in-transaction timeout).
var staleRe = regexp.MustCompile(`msg="(?:results refused|cannot record replay results)[^"]*".* n=(\d+)`)

// staleCount adds up the results a process's log says it published but
// did not record (staleRe).
func staleCount(log string) int {
	n := 0
	for _, m := range staleRe.FindAllStringSubmatch(log, -1) {
		k, _ := strconv.Atoi(m[1])
		n += k
	}
	return n
}

var publishedRe = regexp.MustCompile(`(?m)^quarantine_replay_published_total\{outcome="(\w+)",queue="[^"]*"\} (\d+)`)

// published returns a process's replay counters by outcome, from /metrics.
func published(t *testing.T, p *testbin.Process) map[string]int {
	t.Helper()
	_, raw := p.API("").Do(t, "GET", "/metrics", nil, nil)
	out := map[string]int{}
	for _, m := range publishedRe.FindAllStringSubmatch(string(raw), -1) {
		n, _ := strconv.Atoi(m[2])
		out[m[1]] += n
	}
	return out
}

// Two service processes sharing one PostgreSQL share a batch's rate:
// where the messages arrive, never more than rate + burst in a second.
func TestReplayTwoProcessesShareTheRate(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the quarantine binary")
	}
	timingTest(t)
	t.Parallel()
	const n, rate, burst = 150, 40, 4
	br := newBroker(t)
	work, dlq := deadLetters(br, n)
	a, b, token := twoProcesses(t, dlq, work, "replay: {canary: 0, poll: 50ms}\n")
	api := a.API(token)
	api.WaitMessages(t, work, n, 30*time.Second)
	got := br.consumeAll(work)
	var created struct {
		Replay testbin.Batch `json:"replay"`
	}
	start := time.Now()
	api.MustDo(t, 201, "POST", "/api/v1/replays", map[string]any{
		"filter": map[string]any{"queue": []string{work}}, "expect_count": n, "rate": rate, "burst": burst, "reason": "rate test",
	}, &created)
	b.API(token).WaitReplay(t, created.Replay.ID, 60*time.Second, "completed")
	ms := got.waitFor(t, n, 10*time.Second)
	took := time.Since(start)
	// The arrivals are stamped by this process's consumer, which a loaded
	// 2-core machine can leave unscheduled for a while and then hand a
	// bunch at once: the rate's worth of the longest such stall, measured
	// meanwhile, may arrive early in a window, and of 10 ms more for the
	// delivery's own variance on loopback. The engine's bound itself is
	// checked exactly where it publishes, in-process
	// (replay/TestReplayNeverAboveItsRate).
	stall := got.longestStall() + 10*time.Millisecond
	peak, bound := maxPerWindow(ms, time.Second), rate+burst+int(math.Ceil(rate*stall.Seconds()))
	if peak > bound {
		t.Errorf("%d messages arrived within one second; the rate is %d/s with burst %d (%d allowing for %s of consumer lateness)", peak, rate, burst, bound, stall)
	}
	if min := time.Duration(n-burst) * time.Second / rate; took < min {
		t.Errorf("%d messages took %s, less than the rate allows (%s)", n, took, min)
	}
	pa, pb := published(t, a)["published"], published(t, b)["published"]
	if pa == 0 || pb == 0 || pa+pb != n {
		t.Errorf("process a published %d, b %d: want both to take part, %d in all", pa, pb, n)
	}
	t.Logf("%d messages in %s; a published %d, b %d; at most %d in a second (bound %d, allowing for %s of consumer lateness)", n, took, pa, pb, peak, bound, stall)
}

// A process stopped (SIGSTOP) does not stop the other, which completes
// the batch; continued, it cannot record the items the other took over:
// each message is recorded once, and the batch completes exactly.
func TestReplayZombieProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the quarantine binary")
	}
	t.Parallel()
	const n, rate, burst, lease = 120, 40, 8, 1.0 // lease: seconds, as configured below
	br := newBroker(t)
	work, dlq := deadLetters(br, n)
	a, b, token := twoProcesses(t, dlq, work, "replay: {canary: 0, lease: 1s, poll: 50ms}\n")
	api := b.API(token)
	api.WaitMessages(t, work, n, 30*time.Second)
	got := br.consumeAll(work)
	var created struct {
		Replay testbin.Batch `json:"replay"`
	}
	api.MustDo(t, 201, "POST", "/api/v1/replays", map[string]any{
		"filter": map[string]any{"queue": []string{work}}, "expect_count": n, "rate": rate, "burst": burst, "reason": "zombie test",
	}, &created)
	got.waitFor(t, 10, 20*time.Second)
	a.Signal(t, syscall.SIGSTOP) // a holds leases, waiting for tokens or publishing
	// b finishes the batch while a stays stopped: it takes over a's
	// leases once they expire, and when a stopped inside a transaction
	// (holding the audit head, a rate bucket or items), PostgreSQL ends
	// a's session after postgres.IdleInTransactionTimeout.
	done := api.WaitReplay(t, created.Replay.ID, 60*time.Second, "completed")
	a.Signal(t, syscall.SIGCONT)
	if done.Counts["published"] != n {
		t.Fatalf("counts %v", done.Counts)
	}
	// a may still publish what it held and try to record it; a graceful
	// stop ends once every worker of a recorded (or gave back) what it
	// had leased.
	a.Signal(t, syscall.SIGTERM)
	if !a.Exited(30 * time.Second) {
		t.Fatal("process a did not stop within 30 s of SIGTERM")
	}
	stale := staleCount(a.Output())
	// b's own leases may expire too on a loaded machine (the lease is 1 s
	// here): its results refused then were published once more each.
	staleB := staleCount(b.Output())
	// Every recorded publish and every unrecorded one was a delivery.
	ms := got.waitFor(t, n+stale, 10*time.Second)
	var page struct {
		Items []struct {
			ID          string `json:"id"`
			ReplayCount int    `json:"replay_count"`
		} `json:"items"`
	}
	api.MustDo(t, 200, "GET", "/api/v1/messages?limit=1000&queue="+work, nil, &page)
	for _, m := range page.Items {
		if m.ReplayCount != 1 {
			t.Errorf("message %s has replay_count %d: a result was recorded twice", m.ID, m.ReplayCount)
		}
	}
	keys := map[string]int{}
	for _, m := range got.messages() {
		k, _ := m.headers["x-idempotency-key"].(string)
		keys[k]++
	}
	if len(keys) != n {
		t.Errorf("%d distinct keys arrived, want %d", len(keys), n)
	}
	for k, c := range keys {
		if c > 2+staleB {
			t.Errorf("key %s arrived %d times: more than one extra publish (b's own unrecorded results: %d)", k, c, staleB)
		}
	}
	// The extra deliveries are a's publishes that were not recorded: at
	// least those its log names, at most what the batch's bucket let a
	// publish in the lease and a half before it stopped. A lease
	// publishes for half its time, then gives the rest back, and its
	// results are recorded (or tried again) until it ends: a publish
	// older than that was recorded, or its record was given up and
	// logged. That is more than the burst: on a loaded machine, a's
	// records of one lease can wait for the store while its next lease
	// takes slots that refilled meanwhile (10 unrecorded seen, burst 8).
	// The log is a lower bound only: a publish whose record a could not
	// even try (stopped between publish and record, then shut down)
	// leaves no line. (b's count is no lower bound: a record b retried
	// after its connection died may have committed the first time and be
	// refused the second.)
	held := burst + int(math.Ceil(rate*1.5*lease))
	if extra := len(ms) - n; extra < stale || extra > held+staleB {
		t.Errorf("%d deliveries for %d messages: want between %d (a's unrecorded results in its log) and %d (what a could publish in a lease and a half, plus b's own unrecorded results) extra",
			len(ms), n, stale, held+staleB)
	}
	t.Logf("%d deliveries; the zombie's unrecorded results: %d, b's: %d", len(ms), stale, staleB)
}

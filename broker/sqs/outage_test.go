package sqs

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
	"github.com/quarantine-dev/quarantine/internal/collecttest"
	"github.com/quarantine-dev/quarantine/internal/pgtest"
	"github.com/quarantine-dev/quarantine/store/postgres"
)

// TestDrainSurvivesBrokerConnectionLoss cuts the network to the broker in
// the middle of a drain: the collector reports receive errors, reconnects
// once the network is back, and stores every message exactly once.
func TestDrainSurvivesBrokerConnectionLoss(t *testing.T) {
	t.Parallel()
	const n = 3000
	e := newEnv(t)
	_, direct := e.queue("connloss", map[string]string{"VisibilityTimeout": "3"})
	ids := e.send(direct, bodies(n, "connloss"), nil)

	p := newProxy(t, strings.TrimPrefix(e.endpoint, "http://"))
	ep := "http://" + p.addr()
	cfg := testConfig(ep, ep+direct[len(e.endpoint):])
	cfg.VisibilityTimeout = 3 * time.Second
	st := sqliteStore(t)
	r := startCollector(t, "dlq-connloss", cfg, st, nil)

	eventually(t, 30*time.Second, "the drain to start", func() bool { return r.c.Stats().Stored >= 300 })
	p.cut()
	// An ack in flight may retry for a while before the collector asks
	// for more and learns the broker is gone.
	eventually(t, 60*time.Second, "a receive error", func() bool { return r.c.Stats().Errors[collect.ErrReceive] > 0 })
	// The collector tried again and failed again: it had its chance to
	// drain more while the broker was unreachable.
	eventually(t, 60*time.Second, "a retried receive failing", func() bool { return r.c.Stats().Errors[collect.ErrReceive] >= 2 })
	if s := r.c.Stats(); s.Stored >= n {
		t.Fatalf("the drain finished while the broker was unreachable: %+v", s)
	}
	p.restore()

	eventually(t, 60*time.Second, "the queue to drain", func() bool { return e.depth(direct) == 0 })
	r.stop()
	exactlyOnce(t, allMessages(t, st, false), ids, func(m *quarantine.Message) string { return m.MessageID })
	t.Logf("stats after the cut: %+v", r.c.Stats())
}

// TestStoreOutageAcksNothing cuts the network to PostgreSQL in the middle
// of a drain for longer than twice the visibility timeout: nothing is
// deleted from the queue while the store is away (every message is stored
// or still queued), the held batch's visibility is extended so its ack
// still works afterwards, and the drain resumes and stores everything
// exactly once.
func TestStoreOutageAcksNothing(t *testing.T) {
	t.Parallel()
	const n = 600
	e := newEnv(t)
	_, qurl := e.queue("storeout", map[string]string{"VisibilityTimeout": "3"})
	ids := e.send(qurl, bodies(n, "storeout"), nil)

	ctx := context.Background()
	directURL := pgtest.URL(t)
	u, err := url.Parse(directURL)
	if err != nil {
		t.Fatal(err)
	}
	p := newProxy(t, u.Host)
	u.Host = p.addr()
	st, err := postgres.Open(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	direct, err := postgres.Open(ctx, directURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { direct.Close() })
	stored := func() int { return len(allMessages(t, direct, false)) }

	cfg := testConfig(e.endpoint, qurl)
	cfg.VisibilityTimeout = 3 * time.Second
	src, err := NewSource("dlq-storeout", cfg, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	acks := collecttest.NewAcks(src)
	c := collect.New(collect.Config{Name: "dlq-storeout", Source: acks, Store: st, BatchSize: 50, Linger: 20 * time.Millisecond,
		MaxBackoff: 500 * time.Millisecond, CommitTimeout: 2 * time.Second, Logger: quietLogger()})
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done; src.Close() })

	eventually(t, 30*time.Second, "the drain to start", func() bool { return c.Stats().Stored >= 100 })
	p.cut()
	eventually(t, 30*time.Second, "the collector to stop acknowledging", func() bool { return collecttest.QuietAfterStoreLoss(c, acks) })
	depthAtCut, acksAtCut := e.depth(qurl), acks.Calls()
	// The outage outlasts twice the visibility timeout (3 s): this wait is
	// the property under test (held messages must not reappear), not a
	// synchronisation.
	for end := time.Now().Add(8 * time.Second); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		d, s := e.depth(qurl), stored()
		if d != depthAtCut {
			t.Fatalf("queue depth went from %d to %d while the store was away: something was acknowledged", depthAtCut, d)
		}
		if d+s < n {
			t.Fatalf("%d queued + %d stored < %d sent: messages lost", d, s, n)
		}
	}
	if n := acks.Calls(); n != acksAtCut {
		t.Fatalf("%d acknowledgements while the store was away", n-acksAtCut)
	}
	p.restore()

	eventually(t, 60*time.Second, "the queue to drain", func() bool { return e.depth(qurl) == 0 })
	cancel()
	<-done
	exactlyOnce(t, allMessages(t, direct, false), ids, func(m *quarantine.Message) string { return m.MessageID })
	if s := c.Stats(); s.Errors[collect.ErrAck] != 0 {
		t.Fatalf("acks failed after the outage (visibility not extended?): %+v", s)
	}
}

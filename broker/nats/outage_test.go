package nats

import (
	"context"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarantine-dev/quarantine/internal/collecttest"
	"github.com/quarantine-dev/quarantine/internal/pgtest"
	"github.com/quarantine-dev/quarantine/store/postgres"
)

// cutProxy forwards TCP connections to a target until it is cut: then it
// drops every connection and refuses new ones until restored.
type cutProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  map[net.Conn]bool
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	t.Cleanup(func() { _ = ln.Close(); p.setCut(true) })
	go p.serve()
	return p
}

func (p *cutProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.forward(c)
	}
}

func (p *cutProxy) forward(c net.Conn) {
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		_ = c.Close()
		return
	}
	p.mu.Unlock()
	u, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	p.conns[c], p.conns[u] = true, true
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(u, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, u); done <- struct{}{} }()
	<-done
	_ = c.Close()
	_ = u.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, u)
	p.mu.Unlock()
}

func (p *cutProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for c := range p.conns {
			_ = c.Close()
		}
	}
}

// TestStoreOutage: the connection to PostgreSQL is cut in the middle of a
// drain for longer than AckWait. Nothing is acknowledged while the store
// is away, the held batch is kept alive (InProgress) rather than
// redelivered, and when the store returns every message is stored exactly
// once and the stream ends fully acknowledged.
func TestStoreOutage(t *testing.T) {
	t.Parallel()
	base := pgtest.URL(t)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newCutProxy(t, u.Host)
	u.Host = proxy.ln.Addr().String()
	ctx := context.Background()
	st, err := postgres.Open(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	direct, err := postgres.Open(ctx, base) // the test's own view, never cut
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = direct.Close() })

	srv := startEmbedded(t)
	_, js := jsClient(t, srv.url())
	stream := uniq("OUTAGE")
	newStream(t, js, jetstream.StreamConfig{Name: stream})
	const n = 3000
	publishEnvelopes(t, js, stream+".jobs", "billing", 0, n)
	const ackWait = 3 * time.Second
	r := runCollector(t, "outage", Config{URL: srv.url(), Stream: stream, AckWait: ackWait}, st, nil, 20)
	eventually(t, 30*time.Second, "part of the drain", func() bool { return storedCount(t, direct, "outage") >= 200 })

	proxy.setCut(true)
	eventually(t, 30*time.Second, "the collector to stop acknowledging", func() bool { return collecttest.QuietAfterStoreLoss(r.col, r.acks) })
	consumer := func() *jetstream.ConsumerInfo {
		c, err := js.Consumer(ctx, stream, "quarantine-outage")
		if err != nil {
			t.Fatal(err)
		}
		return c.CachedInfo()
	}
	atCut, storedAtCut := consumer(), storedCount(t, direct, "outage")
	if storedAtCut >= n {
		t.Fatal("the drain finished before the cut")
	}
	acksAtCut := r.acks.Calls()
	// The outage outlasts AckWait twice: this wait is the property under
	// test (the held batch must not be redelivered), not a synchronisation.
	time.Sleep(2*ackWait + 500*time.Millisecond)
	if n := r.acks.Calls(); n != acksAtCut {
		t.Fatalf("%d acknowledgements while the store was away", n-acksAtCut)
	}
	during, storedDuring := consumer(), storedCount(t, direct, "outage")
	if during.AckFloor.Stream != atCut.AckFloor.Stream || during.AckFloor.Consumer != atCut.AckFloor.Consumer || storedDuring != storedAtCut {
		t.Fatalf("acknowledged or stored while the store was away: ack floor %+v -> %+v, stored %d -> %d",
			atCut.AckFloor, during.AckFloor, storedAtCut, storedDuring)
	}
	if during.NumAckPending == 0 || during.NumRedelivered != 0 {
		t.Fatalf("the held batch was not kept: %d ack pending, %d redelivered", during.NumAckPending, during.NumRedelivered)
	}
	if s := r.col.Stats(); s.Errors["store"] == 0 {
		t.Fatalf("no store error counted: %+v", s)
	}

	proxy.setCut(false)
	eventually(t, 60*time.Second, "the drain resumed and finished", func() bool {
		return storedCount(t, direct, "outage") >= n && consumerDrained(t, js, stream, "quarantine-outage")
	})
	r.stop()
	assertEnvelopesOnce(t, direct, "outage", "billing", n)
	t.Logf("deliveries %d for %d messages; stats %+v", consumer().Delivered.Consumer, n, r.col.Stats())
}

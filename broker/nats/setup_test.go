package nats

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
	"github.com/quarantine-dev/quarantine/internal/collecttest"
	"github.com/quarantine-dev/quarantine/internal/testenv"
	"github.com/quarantine-dev/quarantine/store/sqlite"
)

// envURL names the variable that points the tests at a NATS server with
// JetStream (the project's private one, which scripts/services.sh starts
// and records: internal/testenv).
const envURL = testenv.NATSURL

// realURL returns the URL of the running NATS server. It skips the test
// when none answers, or fails it under CI=true.
func realURL(tb testing.TB) string {
	tb.Helper()
	u := testenv.Require(tb, envURL, "NATS with JetStream")
	nc, err := nats.Connect(u, nats.Timeout(2*time.Second))
	if err == nil {
		js, _ := jetstream.New(nc)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, err = js.AccountInfo(ctx)
		cancel()
		nc.Close()
	}
	if err != nil {
		testenv.Unavailable(tb, envURL, fmt.Sprintf("NATS with JetStream is not available at %s: %v", u, err))
	}
	return u
}

// embedded is a nats-server v2.15 run inside the test process, which a
// test can stop and start again on the same port and store directory.
type embedded struct {
	tb   testing.TB
	mu   sync.Mutex
	opts server.Options
	srv  *server.Server
}

func startEmbedded(tb testing.TB) *embedded {
	tb.Helper()
	e := &embedded{tb: tb, opts: server.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: tb.TempDir(),
		MaxPayload: 8 << 20, NoLog: true, NoSigs: true,
	}}
	e.start()
	// Later starts reuse the port, so clients reconnect to the same URL.
	e.opts.Port = e.srv.Addr().(*net.TCPAddr).Port
	tb.Cleanup(e.stop)
	return e
}

func (e *embedded) start() {
	e.tb.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	opts := e.opts
	var err error
	for range 50 { // the port may linger a moment after a stop
		var s *server.Server
		if s, err = server.NewServer(&opts); err != nil {
			e.tb.Fatalf("nats-server: %v", err)
		}
		go s.Start()
		if s.ReadyForConnections(5 * time.Second) {
			e.srv = s
			return
		}
		s.Shutdown()
		time.Sleep(100 * time.Millisecond)
		err = fmt.Errorf("not ready")
	}
	e.tb.Fatalf("nats-server did not start: %v", err)
}

func (e *embedded) stop() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.srv != nil {
		e.srv.Shutdown()
		e.srv.WaitForShutdown()
		e.srv = nil
	}
}

func (e *embedded) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", e.opts.Port) }

// jsClient connects a test's own client (the "worker" side).
func jsClient(tb testing.TB, url string) (*nats.Conn, jetstream.JetStream) {
	tb.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	return nc, js
}

// uniq returns a name unique to this run, usable as a stream name.
func uniq(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + "_" + hex.EncodeToString(b)
}

// newStream creates a stream capturing name.> and deletes it at the end.
func newStream(tb testing.TB, js jetstream.JetStream, cfg jetstream.StreamConfig) jetstream.Stream {
	tb.Helper()
	ctx := context.Background()
	if len(cfg.Subjects) == 0 {
		cfg.Subjects = []string{cfg.Name + ".>"}
	}
	st, err := js.CreateStream(ctx, cfg)
	if err != nil {
		tb.Fatalf("create stream %s: %v", cfg.Name, err)
	}
	tb.Cleanup(func() { _ = js.DeleteStream(context.Background(), cfg.Name) })
	return st
}

// publishEnvelopes publishes n envelopes numbered from first to subject
// and waits for the stream to confirm each.
func publishEnvelopes(tb testing.TB, js jetstream.JetStream, subject, queue string, first, n int) {
	tb.Helper()
	for i := first; i < first+n; i++ {
		if _, err := js.PublishAsync(subject, envelopeBody(i, queue)); err != nil {
			tb.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(30 * time.Second):
		tb.Fatal("publishing did not complete")
	}
}

// openStore opens a migrated SQLite store in the test's directory.
func openStore(tb testing.TB) *sqlite.Store {
	tb.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(tb.TempDir(), "q.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = st.Close() })
	if err := st.Migrate(ctx); err != nil {
		tb.Fatal(err)
	}
	return st
}

// running is a collector loop over a source, started by runCollector.
type running struct {
	src    *Source
	acks   *collecttest.Acks // src as the collector sees it, counting acks
	col    *collect.Collector
	cancel context.CancelFunc
	done   chan struct{}
}

// stop ends the loop (it finishes its batch) and closes the source.
func (r *running) stop() {
	r.cancel()
	<-r.done
	_ = r.src.Close()
}

func quietLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// runCollector starts a collector named name over a new Source.
func runCollector(tb testing.TB, name string, cfg Config, st collect.Inserter, audit AuditFunc, batch int) *running {
	tb.Helper()
	return runCollectorWith(tb, name, cfg, st, audit, batch, &collect.Preparer{
		Idempotency: []collect.IdempotencyRule{{Queues: []string{"*"}, Header: "X-Idempotency-Key"}},
	})
}

// runCollectorWith is runCollector with the collector's Preparer.
func runCollectorWith(tb testing.TB, name string, cfg Config, st collect.Inserter, audit AuditFunc, batch int, prep *collect.Preparer) *running {
	tb.Helper()
	src, err := NewSource(name, cfg, quietLogger())
	if err != nil {
		tb.Fatal(err)
	}
	src.poll, src.settle, src.retryLost = 200*time.Millisecond, 100*time.Millisecond, 300*time.Millisecond
	if audit != nil {
		src.SetAudit(audit)
	}
	acks := collecttest.NewAcks(src)
	col := collect.New(collect.Config{Name: name, Source: acks, Store: st, BatchSize: batch, Linger: 20 * time.Millisecond,
		MaxBackoff: 500 * time.Millisecond, Logger: quietLogger(), Preparer: prep})
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{src: src, acks: acks, col: col, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		_ = col.Run(ctx)
	}()
	tb.Cleanup(r.stop)
	return r
}

// testStore is what the tests read of a store (SQLite or PostgreSQL).
type testStore interface {
	ListMessages(ctx context.Context, f quarantine.Filter) (quarantine.MessagePage, error)
	CountByQueue(ctx context.Context, f quarantine.Filter) ([]quarantine.QueueCount, error)
	GetMessage(ctx context.Context, id string) (*quarantine.Message, error)
}

// allMessages lists every stored message of source.
func allMessages(tb testing.TB, st testStore, source string) []*quarantine.Message {
	tb.Helper()
	var out []*quarantine.Message
	f := quarantine.Filter{Source: []string{source}, Limit: quarantine.MaxLimit}
	for {
		page, err := st.ListMessages(context.Background(), f)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, page.Messages...)
		if page.Next == nil {
			return out
		}
		f.After = page.Next
	}
}

// patience stretches every wait of these tests: they share two cores with
// other suites and may run under the race detector. A deadline only ends
// a test that already failed.
const patience = 4

// eventually polls cond until it holds or patience*d passes.
func eventually(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	d *= patience
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// consumerDrained reports whether the consumer has nothing pending and
// nothing unacknowledged.
func consumerDrained(tb testing.TB, js jetstream.JetStream, stream, consumer string) bool {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := js.Consumer(ctx, stream, consumer)
	if err != nil {
		return false
	}
	ci := c.CachedInfo()
	return ci.NumPending == 0 && ci.NumAckPending == 0
}

// storedCount counts source's stored messages.
func storedCount(tb testing.TB, st testStore, source string) int {
	tb.Helper()
	counts, err := st.CountByQueue(context.Background(), quarantine.Filter{Source: []string{source}})
	if err != nil {
		tb.Fatal(err)
	}
	n := 0
	for _, c := range counts {
		n += int(c.Count)
	}
	return n
}

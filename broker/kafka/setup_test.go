package kafka

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
	"github.com/quarantine-dev/quarantine/internal/collecttest"
	"github.com/quarantine-dev/quarantine/store/sqlite"
)

// cluster is an in-process Kafka (kfake) for one test.
type cluster struct {
	tb    testing.TB
	c     *kfake.Cluster
	addrs []string
}

func newCluster(tb testing.TB, partitions int32, topics ...string) *cluster {
	tb.Helper()
	opts := []kfake.Opt{kfake.Ports(0), kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(int(partitions))}
	if len(topics) > 0 {
		opts = append(opts, kfake.SeedTopics(partitions, topics...))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	return &cluster{tb: tb, c: c, addrs: c.ListenAddrs()}
}

// client is a plain kgo client of the cluster, closed with the test.
func (k *cluster) client(opts ...kgo.Opt) *kgo.Client {
	k.tb.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(k.addrs...)}, opts...)...)
	if err != nil {
		k.tb.Fatal(err)
	}
	k.tb.Cleanup(cl.Close)
	return cl
}

// produce produces rs and fails the test on any error.
func (k *cluster) produce(rs ...*kgo.Record) {
	k.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := k.client().ProduceSync(ctx, rs...).FirstErr(); err != nil {
		k.tb.Fatal(err)
	}
}

// committedLag is the group's lag on topic: end offsets less committed.
func (k *cluster) committedLag(group, topic string) int64 {
	k.tb.Helper()
	adm := kadm.NewClient(k.client())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		k.tb.Fatal(err)
	}
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		k.tb.Fatal(err)
	}
	var lag int64
	ends.Each(func(o kadm.ListedOffset) {
		c, ok := offs.Lookup(o.Topic, o.Partition)
		at := int64(0)
		if ok {
			at = c.At
		}
		lag += o.Offset - at
	})
	return lag
}

func (k *cluster) config(group string, topics ...string) Config {
	return Config{Brokers: k.addrs, Topics: topics, Group: group}
}

var seq atomic.Int64

func uniq(prefix string) string { return fmt.Sprintf("%s-%d", prefix, seq.Add(1)) }

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

func quietLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// running is a collector loop over a source.
type running struct {
	src    *Source
	acks   *collecttest.Acks
	col    *collect.Collector
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// stop ends the loop (it finishes its batches) and closes the source.
func (r *running) stop() {
	r.once.Do(func() {
		r.cancel()
		<-r.done
		_ = r.src.Close()
	})
}

func runCollector(tb testing.TB, name string, cfg Config, st collect.Inserter, batch int) *running {
	tb.Helper()
	src, err := NewSource(name, cfg, quietLogger())
	if err != nil {
		tb.Fatal(err)
	}
	acks := collecttest.NewAcks(src)
	col := collect.New(collect.Config{Name: name, Source: acks, Store: st, BatchSize: batch, Linger: 20 * time.Millisecond,
		MaxBackoff: 500 * time.Millisecond, Logger: quietLogger(), Preparer: &collect.Preparer{
			Idempotency: []collect.IdempotencyRule{{Queues: []string{"*"}, Header: "X-Idempotency-Key"}},
		}})
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{src: src, acks: acks, col: col, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		_ = col.Run(ctx)
	}()
	tb.Cleanup(r.stop)
	return r
}

type testStore interface {
	ListMessages(ctx context.Context, f quarantine.Filter) (quarantine.MessagePage, error)
}

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

// patience stretches every wait: the tests share two cores.
const patience = 4

func eventually(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	d *= patience
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

package kafka

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/quarantine-dev/quarantine/collect"
	"github.com/quarantine-dev/quarantine/internal/brokertest"
)

// cluster is an in-process Kafka (kfake) for one test.
type cluster struct {
	tb    testing.TB
	c     *kfake.Cluster
	addrs []string

	mu     sync.Mutex
	helper *kgo.Client // shared(): the helpers' client, made on first use
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

// shared is the one client of the helpers (produce, offsets, groups),
// closed with the test. A client per call would keep its connections, and
// their file descriptors at both ends in this process, until the test
// ends: a helper polling every few milliseconds then used up the
// process's descriptors, and kfake's listener closes for good on an
// Accept error (EMFILE), so another test's cluster refused connections.
func (k *cluster) shared() *kgo.Client {
	k.tb.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.helper == nil {
		k.helper = k.client()
	}
	return k.helper
}

// admin is an admin client over shared.
func (k *cluster) admin() *kadm.Client { return kadm.NewClient(k.shared()) }

// produce produces rs and fails the test on any error.
func (k *cluster) produce(rs ...*kgo.Record) {
	k.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := k.shared().ProduceSync(ctx, rs...).FirstErr(); err != nil {
		k.tb.Fatal(err)
	}
}

// committedLag is the group's lag on topic: end offsets less committed.
func (k *cluster) committedLag(group, topic string) int64 {
	k.tb.Helper()
	adm := k.admin()
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

var (
	openStore   = brokertest.OpenStore
	quietLogger = brokertest.QuietLogger
	allMessages = brokertest.AllMessages
	eventually  = brokertest.Eventually
)

const patience = brokertest.Patience

func runCollector(tb testing.TB, name string, cfg Config, st collect.Inserter, batch int) *brokertest.Collector {
	tb.Helper()
	src, err := NewSource(name, cfg, quietLogger())
	if err != nil {
		tb.Fatal(err)
	}
	return brokertest.RunCollector(tb, name, src, st, batch)
}

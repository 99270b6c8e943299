package kafka

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
)

// byMessageID indexes stored messages by message id.
func byMessageID(ms []*quarantine.Message) map[string]*quarantine.Message {
	out := map[string]*quarantine.Message{}
	for _, m := range ms {
		out[m.MessageID] = m
	}
	return out
}

// TestCollectFrameworkDeadLetters produces one dead letter of each format
// the way its framework does, collects them, and checks what was stored
// and that the group's offsets were committed to the end.
func TestCollectFrameworkDeadLetters(t *testing.T) {
	t.Parallel()
	k := newCluster(t, 1, "connect.dlq", "orders.DLT", "streams.dlq")
	st := openStore(t)
	orig := time.Date(2026, 11, 30, 10, 0, 0, 123e6, time.UTC)
	env := `{"envelope":"quarantine.failure/v1","job":{"id":"j-1","name":"charge","queue":"payments","idempotency_key":"pay:1","attempts":5,"payload":{"n":1}},"failure":{"class":"exhausted","reason":"card declined"}}`
	k.produce(
		connectRecord("connect.dlq", "orders", 2, 41, []byte("k-41"), []byte(`{"bad json`), orig,
			"VALUE_CONVERTER", "org.apache.kafka.connect.errors.DataException", "Converting byte[] to Kafka Connect data failed"),
		springRecord("orders.DLT", "orders", 1, 7, []byte{0xff, 0x01}, []byte(`{"order":7}`), orig,
			"org.springframework.kafka.listener.ListenerExecutionFailedException", "Listener failed; stock service answered 500"),
		streamsRecord("streams.dlq", "clicks", 0, 99, []byte("user-9"), []byte(`{"click":1}`), orig,
			"java.lang.IllegalStateException", "window closed"),
		&kgo.Record{Topic: "connect.dlq", Value: []byte(env), Headers: []kgo.RecordHeader{{Key: "x-trace", Value: []byte("abc")}}},
		&kgo.Record{Topic: "streams.dlq", Key: []byte("r"), Value: []byte{0x00, 0xfe, 0xfd}},
	)
	cfg := k.config("quarantine", "connect.dlq", "orders.DLT", "streams.dlq")
	r := runCollector(t, "kafka-dlq", cfg, st, 100)
	eventually(t, 10*time.Second, "5 messages stored", func() bool { return len(allMessages(t, st, "kafka-dlq")) == 5 })
	eventually(t, 10*time.Second, "offsets committed to the end", func() bool {
		return k.committedLag("quarantine", "connect.dlq")+k.committedLag("quarantine", "orders.DLT")+k.committedLag("quarantine", "streams.dlq") == 0
	})
	r.Stop()
	ms := allMessages(t, st, "kafka-dlq")
	got := byMessageID(ms)

	c := got["orders/2/41"]
	if c == nil {
		t.Fatalf("no Connect message among %v", keys(got))
	}
	if c.Queue != "orders" || c.FailureClass != quarantine.ClassMalformed || c.SourceKind != quarantine.SourceKafka ||
		!strings.Contains(c.Reason, "DataException: Converting byte[] to Kafka Connect data failed") ||
		!strings.Contains(c.Reason, "connector orders-sink") || !strings.Contains(c.Reason, "stage VALUE_CONVERTER") ||
		c.PayloadSHA256 != quarantine.PayloadHash([]byte(`{"bad json`)) || c.IdempotencyKey != "order:41" || c.HasFlag(quarantine.FlagMalformed) {
		t.Errorf("Connect message: %+v", c)
	}
	if c.EnqueuedAt == nil || !c.EnqueuedAt.Equal(orig) {
		t.Errorf("Connect enqueued_at %v, want the record timestamp %v", c.EnqueuedAt, orig)
	}
	if c.Headers[HeaderKey] != "k-41" || c.Headers[HeaderTopic] != "connect.dlq" || c.Headers["__connect.errors.exception.stacktrace"] == "" {
		t.Errorf("Connect headers: %v", c.Headers)
	}

	s := got["orders/1/7"]
	if s == nil {
		t.Fatalf("no Spring message among %v", keys(got))
	}
	if s.Queue != "orders" || s.FailureClass != quarantine.ClassExhausted || s.Attempts != 3 || s.ContentType != "application/json" ||
		!strings.Contains(s.Reason, "stock service answered 500") || s.HasFlag(quarantine.FlagMalformed) {
		t.Errorf("Spring message: %+v", s)
	}
	if s.Headers[HeaderKeyBase64] != "/wE=" || s.Headers["kafka_dlt-original-partition"] != "1" || s.Headers["kafka_dlt-original-offset"] != "7" {
		t.Errorf("Spring headers: %v", s.Headers)
	}
	if s.EnqueuedAt == nil || !s.EnqueuedAt.Equal(orig) {
		t.Errorf("Spring enqueued_at %v, want the original timestamp %v", s.EnqueuedAt, orig)
	}

	w := got["clicks/0/99"]
	if w == nil {
		t.Fatalf("no Streams message among %v", keys(got))
	}
	if w.Queue != "clicks" || w.FailureClass != quarantine.ClassPermanent || w.Reason != "Kafka Streams: java.lang.IllegalStateException: window closed" {
		t.Errorf("Streams message: %+v", w)
	}

	e := got["j-1"]
	if e == nil {
		t.Fatalf("no envelope message among %v", keys(got))
	}
	if e.Queue != "payments" || e.IdempotencyKey != "pay:1" || e.Reason != "card declined" || e.PayloadSHA256 != quarantine.PayloadHash([]byte(`{"n":1}`)) || e.JobName != "charge" {
		t.Errorf("envelope message: %+v", e)
	}

	var raw *quarantine.Message
	for _, m := range ms {
		if m.Headers[HeaderTopic] == "streams.dlq" && m.Headers[HeaderKey] == "r" {
			raw = m
		}
	}
	if raw == nil || !raw.HasFlag(quarantine.FlagMalformed) || raw.FailureClass != quarantine.ClassUnknown || raw.Queue != "" ||
		raw.PayloadSHA256 != quarantine.PayloadHash([]byte("\x00\xfe\xfd")) {
		t.Errorf("raw message: %+v", raw)
	}
}

func keys(m map[string]*quarantine.Message) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// failingStore fails every insert after the first ok ones, until healed.
type failingStore struct {
	collect.Inserter
	ok     chan struct{} // one token per insert allowed
	broken chan struct{}
}

func (f *failingStore) InsertBatch(ctx context.Context, msgs []*quarantine.Message) ([]quarantine.InsertResult, error) {
	select {
	case <-f.ok:
		return f.Inserter.InsertBatch(ctx, msgs)
	default:
		select {
		case f.broken <- struct{}{}:
		default:
		}
		return nil, quarantine.Errorf(quarantine.EUNAVAILABLE, "store down")
	}
}

// TestCollectRestartMidStreamLosesNothing stops a collector whose store
// failed mid-stream (some batches stored and committed, later ones not),
// then drains the topic with a new source of the same group: every record
// is stored exactly once, none is lost, and the offsets reach the end.
func TestCollectRestartMidStreamLosesNothing(t *testing.T) {
	t.Parallel()
	const n = 300
	topic := "orders.DLT"
	k := newCluster(t, 3, topic)
	var rs []*kgo.Record
	for i := range n {
		rs = append(rs, springRecord(topic, "orders", int32(i%3), int64(i), []byte(fmt.Sprint("k", i%7)), []byte(fmt.Sprintf(`{"i":%d}`, i)),
			time.UnixMilli(1_700_000_000_000+int64(i)), "java.lang.RuntimeException", fmt.Sprint("boom ", i)))
	}
	k.produce(rs...)
	st := openStore(t)
	fs := &failingStore{Inserter: st, ok: make(chan struct{}, 10), broken: make(chan struct{}, 1)}
	fs.ok <- struct{}{}
	fs.ok <- struct{}{}
	cfg := k.config("quarantine", topic)
	r := runCollector(t, "kafka-dlq", cfg, fs, 40)
	<-fs.broken // two batches stored, the next failed
	r.Stop()
	stored := len(allMessages(t, st, "kafka-dlq"))
	if stored == 0 || stored >= n {
		t.Fatalf("%d stored before the restart, want some but not all", stored)
	}
	if lag := k.committedLag("quarantine", topic); lag < int64(n-stored) {
		t.Fatalf("committed lag %d with %d of %d stored: an offset was committed past a record not stored", lag, stored, n)
	}

	r2 := runCollector(t, "kafka-dlq", cfg, st, 40)
	eventually(t, 15*time.Second, "every record stored", func() bool { return len(allMessages(t, st, "kafka-dlq")) == n })
	eventually(t, 10*time.Second, "offsets committed to the end", func() bool { return k.committedLag("quarantine", topic) == 0 })
	r2.Stop()
	ms := allMessages(t, st, "kafka-dlq")
	seen := map[string]bool{}
	for _, m := range ms {
		if seen[m.MessageID] {
			t.Fatalf("message %s stored twice", m.MessageID)
		}
		seen[m.MessageID] = true
	}
	if len(ms) != n {
		t.Fatalf("%d stored, want %d", len(ms), n)
	}
}

// TestLedgerNeverCommitsPastAnUnstoredRecord acknowledges batches out of
// order and skips one: the offset committed stops before the first record
// not stored.
func TestLedgerNeverCommitsPastAnUnstoredRecord(t *testing.T) {
	t.Parallel()
	l := newLedger()
	var ms []mark
	for off := int64(10); off < 16; off++ {
		ms = append(ms, l.handOut(&kgo.Record{Topic: "t", Partition: 0, Offset: off, LeaderEpoch: 1}))
	}
	if got := l.stored(ms[2:4]); len(got) != 0 {
		t.Fatalf("offsets %v committable while 10 and 11 are not stored", got)
	}
	got := l.stored(ms[0:1])
	if got["t"][0].Offset != 11 {
		t.Fatalf("commit %v, want 11 (10 stored, 11 not)", got)
	}
	l.committed(got)
	got = l.stored(ms[1:2])
	if got["t"][0].Offset != 14 {
		t.Fatalf("commit %v, want 14 (10..13 stored)", got)
	}
	l.committed(got)
	// 14 never stored (its batch failed at shutdown); 15 stored.
	if got := l.stored(ms[5:6]); len(got) != 0 {
		t.Fatalf("offsets %v committable past 14, which is not stored", got)
	}
	// Revoked: a late acknowledgement of the old assignment is ignored.
	if left := l.drop(map[string][]int32{"t": {0}}); len(left) != 0 {
		t.Fatalf("drop returned %v, want nothing uncommitted", left)
	}
	again := l.handOut(&kgo.Record{Topic: "t", Partition: 0, Offset: 14})
	if got := l.stored(ms[4:5]); len(got) != 0 {
		t.Fatalf("a delivery of the revoked assignment moved the commit: %v", got)
	}
	if got := l.stored([]mark{again}); got["t"][0].Offset != 15 {
		t.Fatalf("commit %v after the new assignment stored 14, want 15", got)
	}
}

// A cluster that cannot be reached is an EUNAVAILABLE error of Receive
// (the collector counts it and backs off), not a wait for ever.
func TestReceiveUnreachable(t *testing.T) {
	t.Parallel()
	src, err := NewSource("down", Config{Brokers: []string{"127.0.0.1:1"}, Topics: []string{"a.dlq"}}, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	src.poll = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), patience*5*time.Second)
	defer cancel()
	ds, err := src.Receive(ctx, 10, 0)
	if len(ds) != 0 || quarantine.ErrorCode(err) != quarantine.EUNAVAILABLE || ctx.Err() != nil {
		t.Fatalf("%d deliveries, %v", len(ds), err)
	}
}

// slowStore takes a while for every batch.
type slowStore struct {
	collect.Inserter
	d time.Duration
}

func (s slowStore) InsertBatch(ctx context.Context, msgs []*quarantine.Message) ([]quarantine.InsertResult, error) {
	time.Sleep(s.d)
	return s.Inserter.InsertBatch(ctx, msgs)
}

// Two collectors of one configuration share the group: while they drain
// a topic, one stops with batches in hand (its partitions move to the
// other, what it stored is committed on the way out, what it held is read
// again by the other). Every record is stored exactly once and the
// offsets reach the end.
func TestCollectRebalanceLosesNothing(t *testing.T) {
	t.Parallel()
	const n = 2000
	topic := "orders.DLT"
	k := newCluster(t, 4, topic)
	st := openStore(t)
	cfg := k.config("quarantine", topic)
	cfg.SessionTimeout = 6 * time.Second
	var rs []*kgo.Record
	for i := range n {
		rs = append(rs, streamsRecord(topic, "clicks", int32(i%4), int64(i), []byte(fmt.Sprint("u", i%13)), []byte(fmt.Sprintf(`{"i":%d}`, i)),
			time.UnixMilli(1_700_000_000_000+int64(i)), "java.lang.IllegalStateException", "boom"))
	}
	k.produce(rs...)
	slow := slowStore{Inserter: st, d: 100 * time.Millisecond}
	a := runCollector(t, "kafka-dlq", cfg, slow, 25)
	b := runCollector(t, "kafka-dlq", cfg, slow, 25)
	eventually(t, 15*time.Second, "both collectors storing", func() bool {
		return a.Col.Stats().Stored > 0 && b.Col.Stats().Stored > 0
	})
	a.Stop()
	if len(allMessages(t, st, "kafka-dlq")) == n {
		t.Fatal("drained before the stop: nothing was in hand")
	}
	eventually(t, 30*time.Second, "every record stored", func() bool { return len(allMessages(t, st, "kafka-dlq")) == n })
	eventually(t, 15*time.Second, "offsets committed to the end", func() bool { return k.committedLag("quarantine", topic) == 0 })
	seen := map[string]bool{}
	for _, m := range allMessages(t, st, "kafka-dlq") {
		if seen[m.MessageID] {
			t.Fatalf("record %s stored twice", m.MessageID)
		}
		seen[m.MessageID] = true
	}
}

package pubsub

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	ps "cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/quarantine-dev/quarantine"
)

// A message forwarded by a dead-letter policy is stored with its source
// subscription's topic as the queue, the delivery count as attempts, the
// original publish time, its attributes (the idempotency key read from
// one by the rules), its ordering key, and its data byte-exact; it is
// acknowledged once stored.
func TestCollectForwardedDeadLetter(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.topic("orders")
	s.topic("orders.dlq")
	s.subscription("orders-worker", "orders", "", 0)
	s.subscription("orders.dlq-quarantine", "orders.dlq", "", 0)
	published := time.Date(2026, 11, 30, 8, 0, 1, 732e6, time.UTC)
	orig := &ps.Message{Data: []byte(`{"order":7}`), OrderingKey: "customer-9",
		Attributes: map[string]string{"x-idempotency-key": "order:7", "traceparent": "00-abc-def-01", "content-type": "application/json"}}
	ids := s.publish("orders.dlq", forwarded(orig, "orders-worker", "5", published))
	st := openStore(t)
	r := runCollector(t, "ps-dlq", s.config("orders.dlq-quarantine"), st, 10)
	eventually(t, 10*time.Second, "the dead letter stored", func() bool { return len(allMessages(t, st, "ps-dlq")) == 1 })
	eventually(t, 10*time.Second, "the acknowledgement", func() bool { return r.Acks.Calls() > 0 && r.Acks.InFlight() == 0 })
	m, err := st.GetMessage(context.Background(), allMessages(t, st, "ps-dlq")[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if m.Queue != "orders" || m.SourceKind != quarantine.SourcePubSub || m.Attempts != 5 || m.FailureClass != quarantine.ClassExhausted ||
		string(m.Payload) != `{"order":7}` || m.IdempotencyKey != "order:7" || m.MessageID != ids[0] || len(m.Flags) != 0 ||
		m.EnqueuedAt == nil || !m.EnqueuedAt.Equal(published) || m.ContentType != "application/json" {
		t.Fatalf("stored %+v", m)
	}
	for k, want := range map[string]string{HeaderOrderingKey: "customer-9", "traceparent": "00-abc-def-01", HeaderMessageID: ids[0],
		HeaderSourceTopic: fullName(project, "topics", "orders"), AttrSourceDeliveryCount: "5",
		HeaderSubscription: fullName(project, "subscriptions", "orders.dlq-quarantine")} {
		if m.Headers[k] != want {
			t.Errorf("header %s = %q, want %q", k, m.Headers[k], want)
		}
	}
	if want := "Pub/Sub: subscription orders-worker gave up after 5 deliveries (max delivery attempts of its dead-letter policy)"; m.Reason != want {
		t.Errorf("reason %q", m.Reason)
	}
	r.Stop()
	// Acknowledged: nothing is delivered again to a new source.
	src, err := NewSource("ps-dlq", s.config("orders.dlq-quarantine"), quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	src.poll = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if ds, err := src.Receive(ctx, 10, 0); len(ds) != 0 {
		t.Fatalf("redelivered after its ack: %d, %v", len(ds), err)
	}
}

// The real dead-letter path of pstest: a subscription with a dead-letter
// policy (5 attempts) and a consumer that nacks every delivery. pstest
// forwards the message but does not stamp the CloudPubSubDeadLetterSource*
// attributes, so the collector stores it raw, flagged, under source_topic,
// with its data, attributes and ordering key. A failure envelope and a
// message of no known form published to the dead-letter topic are stored
// too.
func TestCollectDeadLetterPolicy(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.topic("reports")
	s.topic("reports.dlq")
	s.subscription("reports-worker", "reports", "reports.dlq", 5)
	s.subscription("reports.dlq-quarantine", "reports.dlq", "", 0)
	s.publish("reports", &ps.Message{Data: []byte("not json"), OrderingKey: "k1", Attributes: map[string]string{"a": "b"}})
	// The consumer nacks until the policy moves the message.
	ctx, cancel := context.WithTimeout(context.Background(), 30*patience*time.Second)
	defer cancel()
	nacks := 0
	for len(s.srv.Messages()) < 2 && nacks < 50 {
		resp, err := s.cl.SubscriptionAdminClient.Pull(ctx, &pubsubpb.PullRequest{Subscription: fullName(project, "subscriptions", "reports-worker"), MaxMessages: 10})
		if err != nil {
			t.Fatal(err)
		}
		for _, rm := range resp.ReceivedMessages {
			nacks++
			if err := s.cl.SubscriptionAdminClient.ModifyAckDeadline(ctx, &pubsubpb.ModifyAckDeadlineRequest{
				Subscription: fullName(project, "subscriptions", "reports-worker"), AckIds: []string{rm.AckId}}); err != nil {
				t.Fatal(err)
			}
		}
		if nacks >= 5 && len(resp.ReceivedMessages) == 0 {
			break
		}
	}
	if nacks != 5 {
		t.Fatalf("%d deliveries before the dead-letter policy forwarded it, want 5", nacks)
	}
	env := `{"envelope":"quarantine.failure/v1","job":{"id":"j-1","name":"build-report","queue":"reports","idempotency_key":"r-1",` +
		`"attempts":1,"payload":{"r":1}},"failure":{"class":"permanent","reason":"template missing"}}`
	s.publish("reports.dlq", &ps.Message{Data: []byte(env)})

	st := openStore(t)
	cfg := s.config("reports.dlq-quarantine")
	cfg.SourceTopic = "reports"
	runCollector(t, "ps-policy", cfg, st, 10)
	eventually(t, 10*time.Second, "both stored", func() bool { return len(allMessages(t, st, "ps-policy")) == 2 })
	ms := allMessages(t, st, "ps-policy")
	slices.SortFunc(ms, func(a, b *quarantine.Message) int { return strings.Compare(a.JobName, b.JobName) }) // the raw one first
	raw, err := st.GetMessage(context.Background(), ms[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if raw.Queue != "reports" || string(raw.Payload) != "not json" || raw.Headers["a"] != "b" || raw.Headers[HeaderOrderingKey] != "k1" ||
		raw.FailureClass != quarantine.ClassUnknown || !slices.Contains(raw.Flags, quarantine.FlagMalformed) {
		t.Fatalf("pstest's dead letter stored as %+v", raw)
	}
	e, err := st.GetMessage(context.Background(), ms[1].ID)
	if err != nil {
		t.Fatal(err)
	}
	if e.Queue != "reports" || e.JobName != "build-report" || e.IdempotencyKey != "r-1" || e.FailureClass != quarantine.ClassPermanent ||
		e.Reason != "template missing" || string(e.Payload) != `{"r":1}` || len(e.Flags) != 0 {
		t.Fatalf("the envelope stored as %+v", e)
	}
}

// A batch received and stored but never acknowledged (the collector died
// between the store's commit and its ack) is delivered again and
// deduplicated by message ID: every message is stored once.
func TestCollectRedeliveryDeduplicated(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.topic("jobs.dlq")
	s.subscription("jobs.dlq-q", "jobs.dlq", "", 0)
	const n = 40
	var ms []*ps.Message
	for i := range n {
		ms = append(ms, forwarded(&ps.Message{Data: []byte(strconv.Itoa(i))}, "jobs-worker", "5", time.Now()))
	}
	s.publish("jobs.dlq", ms...)
	st := openStore(t)
	src, err := NewSource("ps-dedupe", s.config("jobs.dlq-q"), quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*patience*time.Second)
	defer cancel()
	ds, err := src.Receive(ctx, 15, 200*time.Millisecond)
	if err != nil || len(ds) == 0 {
		t.Fatalf("Receive: %d, %v", len(ds), err)
	}
	batch := make([]*quarantine.Message, len(ds))
	for i, d := range ds {
		batch[i] = d.Message
		batch[i].CollectedAt = time.Now()
	}
	if _, err := st.InsertBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	_ = src.Close() // never acknowledged: given back
	runCollector(t, "ps-dedupe", s.config("jobs.dlq-q"), st, 7)
	eventually(t, 20*time.Second, "all stored", func() bool { return len(allMessages(t, st, "ps-dedupe")) == n })
	time.Sleep(300 * time.Millisecond) // let a stray redelivery land, if any
	got := allMessages(t, st, "ps-dedupe")
	seen := map[string]bool{}
	for _, m := range got {
		if seen[m.MessageID] {
			t.Fatalf("message %s stored twice", m.MessageID)
		}
		seen[m.MessageID] = true
	}
	if len(got) != n {
		t.Fatalf("%d stored, want %d", len(got), n)
	}
}

// A subscription that does not exist is an EUNAVAILABLE error, not a
// silent wait; so is an endpoint where nothing answers.
func TestSourceUnavailable(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	for name, cfg := range map[string]Config{
		"no subscription": s.config("nope"),
		"no service":      {Project: project, Subscription: "x-sub", Endpoint: "127.0.0.1:1"},
	} {
		src, err := NewSource("ps-"+name, cfg, quietLogger())
		if err != nil {
			t.Fatal(err)
		}
		src.poll = 300 * time.Millisecond
		ctx, cancel := context.WithTimeout(context.Background(), patience*10*time.Second)
		ds, err := src.Receive(ctx, 10, 0)
		if len(ds) != 0 || quarantine.ErrorCode(err) != quarantine.EUNAVAILABLE || ctx.Err() != nil {
			t.Errorf("%s: %d deliveries, %v", name, len(ds), err)
		}
		cancel()
		_ = src.Close()
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	ok := Config{Project: "my-project", Subscription: "orders.dlq-quarantine"}
	for _, tc := range []struct {
		name  string
		mod   func(*Config)
		field string
	}{
		{"ok", func(*Config) {}, ""},
		{"full subscription", func(c *Config) { c.Subscription = "projects/other-project/subscriptions/dlq" }, ""},
		{"no project", func(c *Config) { c.Project = "" }, "project"},
		{"bad project", func(c *Config) { c.Project = "My Project" }, "project"},
		{"no subscription", func(c *Config) { c.Subscription = "" }, "subscription"},
		{"bad subscription", func(c *Config) { c.Subscription = "goog-x" }, "subscription"},
		{"bad path", func(c *Config) { c.Subscription = "projects/p/topics/t" }, "subscription"},
		{"bad source topic", func(c *Config) { c.SourceTopic = "a b" }, "source_topic"},
		{"endpoint url", func(c *Config) { c.Endpoint = "http://127.0.0.1:8085" }, "endpoint"},
		{"endpoint and credentials", func(c *Config) { c.Endpoint = "127.0.0.1:8085"; c.CredentialsFile = "/k.json" }, "credentials_file"},
		{"streams", func(c *Config) { c.Streams = 17 }, "streams"},
		{"outstanding", func(c *Config) { c.MaxOutstanding = -1 }, "max_outstanding"},
	} {
		c := ok
		tc.mod(&c)
		err := c.Validate()
		if quarantine.ErrorField(err) != tc.field || (tc.field == "") != (err == nil) {
			t.Errorf("%s: %v, want field %q", tc.name, err, tc.field)
		}
	}
}

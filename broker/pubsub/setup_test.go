package pubsub

import (
	"context"
	"os"
	"testing"
	"time"

	ps "cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/quarantine-dev/quarantine/collect"
	"github.com/quarantine-dev/quarantine/internal/brokertest"
	"github.com/quarantine-dev/quarantine/internal/testbin"
)

const project = "quarantine-test"

// TestMain removes the binary that testbin.Path built.
func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Remove()
	os.Exit(code)
}

// server is an in-process Pub/Sub (pstest) for one test, listening on a
// loopback TCP port, and an admin client of it.
type server struct {
	tb  testing.TB
	srv *pstest.Server
	cl  *ps.Client
}

func newServer(tb testing.TB, opts ...pstest.ServerReactorOption) *server {
	tb.Helper()
	srv := pstest.NewServerWithAddress("127.0.0.1:0", opts...)
	tb.Cleanup(func() { _ = srv.Close() })
	s := &server{tb: tb, srv: srv}
	cl, err := s.config("unused").newClient()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = cl.Close() })
	s.cl = cl
	return s
}

// config is a collector's configuration for subscription sub.
func (s *server) config(sub string) Config {
	return Config{Project: project, Subscription: sub, Endpoint: s.srv.Addr}
}

func (s *server) topic(id string) {
	s.tb.Helper()
	if _, err := s.cl.TopicAdminClient.CreateTopic(context.Background(), &pubsubpb.Topic{Name: fullName(project, "topics", id)}); err != nil {
		s.tb.Fatal(err)
	}
}

// subscription makes sub on topic; with deadLetter, a dead-letter policy
// forwarding to that topic after maxAttempts deliveries.
func (s *server) subscription(sub, topic, deadLetter string, maxAttempts int32) {
	s.tb.Helper()
	p := &pubsubpb.Subscription{Name: fullName(project, "subscriptions", sub), Topic: fullName(project, "topics", topic),
		AckDeadlineSeconds: 10, MessageRetentionDuration: durationpb.New(time.Hour)}
	if deadLetter != "" {
		p.DeadLetterPolicy = &pubsubpb.DeadLetterPolicy{DeadLetterTopic: fullName(project, "topics", deadLetter), MaxDeliveryAttempts: maxAttempts}
	}
	if _, err := s.cl.SubscriptionAdminClient.CreateSubscription(context.Background(), p); err != nil {
		s.tb.Fatal(err)
	}
}

// publish publishes ms to topic and waits for each.
func (s *server) publish(topic string, ms ...*ps.Message) []string {
	s.tb.Helper()
	t := s.cl.Publisher(topic)
	t.EnableMessageOrdering = true
	defer t.Stop()
	rs := make([]*ps.PublishResult, len(ms))
	for i, m := range ms {
		rs[i] = t.Publish(context.Background(), m)
	}
	ids := make([]string, len(ms))
	for i, r := range rs {
		id, err := r.Get(context.Background())
		if err != nil {
			s.tb.Fatal(err)
		}
		ids[i] = id
	}
	return ids
}

// pull acknowledges and returns n messages of sub.
func (s *server) pull(sub string, n int) []*pubsubpb.PubsubMessage {
	s.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*patience*time.Second)
	defer cancel()
	var out []*pubsubpb.PubsubMessage
	for len(out) < n {
		resp, err := s.cl.SubscriptionAdminClient.Pull(ctx, &pubsubpb.PullRequest{Subscription: fullName(project, "subscriptions", sub), MaxMessages: int32(n - len(out))})
		if err != nil {
			s.tb.Fatalf("%d of %d messages pulled from %s: %v", len(out), n, sub, err)
		}
		var ids []string
		for _, rm := range resp.ReceivedMessages {
			out = append(out, rm.Message)
			ids = append(ids, rm.AckId)
		}
		if len(ids) > 0 {
			if err := s.cl.SubscriptionAdminClient.Acknowledge(ctx, &pubsubpb.AcknowledgeRequest{Subscription: fullName(project, "subscriptions", sub), AckIds: ids}); err != nil {
				s.tb.Fatal(err)
			}
		}
	}
	return out
}

// forwarded is m as a dead-letter policy forwards it from subscription
// sub: the CloudPubSubDeadLetterSource* attributes added to its own.
func forwarded(m *ps.Message, sub string, deliveries string, published time.Time) *ps.Message {
	attrs := map[string]string{
		AttrSourceSubscription:  sub,
		AttrSourceProject:       project,
		AttrSourceDeliveryCount: deliveries,
		AttrSourcePublishTime:   published.UTC().Format("2006-01-02T15:04:05.000-07:00"),
	}
	for k, v := range m.Attributes {
		attrs[k] = v
	}
	return &ps.Message{Data: m.Data, Attributes: attrs, OrderingKey: m.OrderingKey}
}

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

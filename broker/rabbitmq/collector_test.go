package rabbitmq

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
)

// slowStore adds latency to each commit so that a test can act mid-drain.
type slowStore struct {
	collect.Inserter
	delay time.Duration
}

func (s slowStore) InsertBatch(ctx context.Context, msgs []*quarantine.Message) ([]quarantine.InsertResult, error) {
	time.Sleep(s.delay)
	return s.Inserter.InsertBatch(ctx, msgs)
}

// bodiesOf returns the bodies of ps: the payloads they are stored with,
// unless they are envelopes.
func bodiesOf(ps []amqp.Publishing) [][]byte {
	out := make([][]byte, len(ps))
	for i, p := range ps {
		out[i] = p.Body
	}
	return out
}

// exactlyOnce asserts that the messages stored by source have exactly the
// payloads given, each once.
func exactlyOnce(t *testing.T, st lister, source string, payloads [][]byte) []*quarantine.Message {
	t.Helper()
	got := stored(t, st, source)
	want := map[string]bool{}
	for _, p := range payloads {
		want[quarantine.PayloadHash(p)] = true
	}
	seen := map[string]int{}
	for _, m := range got {
		seen[m.PayloadSHA256]++
	}
	for h, n := range seen {
		if n != 1 || !want[h] {
			t.Errorf("payload %s stored %d times (published: %t)", h[:12], n, want[h])
		}
	}
	if len(got) != len(payloads) || len(seen) != len(want) {
		t.Fatalf("stored %d messages (%d distinct), want %d", len(got), len(seen), len(payloads))
	}
	return got
}

func TestCollectorFormats(t *testing.T) {
	t.Parallel()
	const n = 300
	cases := []struct {
		name string
		// fill puts n messages into dlq and returns the payloads they are
		// to be stored with, and the queue they are to be recorded under.
		fill  func(b *testBroker, dlq string) ([][]byte, string)
		check func(t *testing.T, m *quarantine.Message, i int, queue string)
	}{
		{"envelope", func(b *testBroker, dlq string) ([][]byte, string) {
			ps := make([]amqp.Publishing, n)
			payloads := make([][]byte, n)
			for i := range ps {
				env := map[string]any{"envelope": collect.EnvelopeV1,
					"job":     map[string]any{"id": fmt.Sprint("job-", i), "name": "charge", "queue": "payments", "idempotency_key": fmt.Sprint("pay-", i), "attempts": i % 7, "payload": map[string]int{"n": i}},
					"failure": map[string]any{"class": "exhausted", "reason": fmt.Sprintf("card declined #%d", i)}}
				ps[i].Body, _ = json.Marshal(env)
				ps[i].ContentType = "application/json"
				payloads[i] = fmt.Appendf(nil, `{"n":%d}`, i)
			}
			b.publish(dlq, ps...)
			return payloads, "payments"
		}, func(t *testing.T, m *quarantine.Message, i int, queue string) {
			if m.FailureClass != quarantine.ClassExhausted || m.Reason != fmt.Sprintf("card declined #%d", i) ||
				m.Attempts != i%7 || m.IdempotencyKey != fmt.Sprint("pay-", i) || m.JobName != "charge" || m.MessageID != fmt.Sprint("job-", i) {
				t.Errorf("envelope %d: %+v", i, m)
			}
		}},
		{"native rejected", func(b *testBroker, dlq string) ([][]byte, string) {
			work := b.workQueue(dlq, nil)
			ps := numbered("rej", n, func(i int, p *amqp.Publishing) {
				p.Headers = amqp.Table{"x-idempotency-key": fmt.Sprint("ord-", i)}
				p.MessageId = fmt.Sprint("m-", i)
			})
			b.publish(work, ps...)
			b.settle(work, n, false)
			return bodiesOf(ps), work
		}, func(t *testing.T, m *quarantine.Message, i int, queue string) {
			if m.FailureClass != quarantine.ClassRejected || m.Reason != "rejected from queue "+queue+" (x-death count 1)" ||
				m.Attempts != 1 || m.IdempotencyKey != fmt.Sprint("ord-", i) || m.MessageID != fmt.Sprint("m-", i) {
				t.Errorf("native %d: %+v", i, m)
			}
		}},
		{"native expired", func(b *testBroker, dlq string) ([][]byte, string) {
			work := b.workQueue(dlq, amqp.Table{"x-message-ttl": int32(0)})
			ps := numbered("exp", n, func(i int, p *amqp.Publishing) {
				p.Headers = amqp.Table{"x-idempotency-key": fmt.Sprint("exp-", i)}
			})
			b.publish(work, ps...)
			return bodiesOf(ps), work
		}, func(t *testing.T, m *quarantine.Message, i int, queue string) {
			if m.FailureClass != quarantine.ClassExpired || !strings.HasPrefix(m.Reason, "expired from queue "+queue) ||
				m.Attempts != 1 || m.IdempotencyKey != fmt.Sprint("exp-", i) || len(m.Flags) != 0 {
				t.Errorf("expired %d: %+v", i, m)
			}
		}},
		{"native overflow", func(b *testBroker, dlq string) ([][]byte, string) {
			work := lengthLimited(b, dlq, 10)
			ps := numbered("full", n+10, func(i int, p *amqp.Publishing) {
				p.Headers = amqp.Table{"x-idempotency-key": fmt.Sprint("full-", i)}
			})
			b.publish(work, ps...)
			return bodiesOf(ps[:n]), work // the 10 newest stay
		}, func(t *testing.T, m *quarantine.Message, i int, queue string) {
			if m.FailureClass != quarantine.ClassOverflow || m.Reason != "maxlen from queue "+queue+" (x-death count 1)" ||
				m.IdempotencyKey != fmt.Sprint("full-", i) || len(m.Flags) != 0 {
				t.Errorf("overflow %d: %+v", i, m)
			}
		}},
		{"raw with source_queue", func(b *testBroker, dlq string) ([][]byte, string) {
			ps := numbered("raw", n, func(i int, p *amqp.Publishing) {
				p.Headers = amqp.Table{"x-idempotency-key": fmt.Sprint("raw-", i)}
			})
			b.publish(dlq, ps...)
			return bodiesOf(ps), "orders"
		}, func(t *testing.T, m *quarantine.Message, i int, queue string) {
			if m.FailureClass != quarantine.ClassUnknown || !m.HasFlag(quarantine.FlagMalformed) ||
				!strings.Contains(m.Reason, "neither") || m.IdempotencyKey != fmt.Sprint("raw-", i) {
				t.Errorf("raw %d: %+v", i, m)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newBroker(t)
			dlq := b.failureQueue(nil)
			published, queue := tc.fill(b, dlq)
			b.waitDepth(dlq, n)
			st := testStore(t)
			src := testSource(t, "fmt", dlq, func(c *Config) {
				if strings.HasPrefix(tc.name, "raw") {
					c.SourceQueue = queue
				}
			})
			c, stop := runCollector(t, "fmt", src, st, 64)
			waitStored(t, c, n, 30*time.Second)
			stop()
			b.waitDepth(dlq, 0)
			got := exactlyOnce(t, st, "fmt", published)
			index := map[string]int{}
			for i, p := range published {
				index[quarantine.PayloadHash(p)] = i
			}
			for _, m := range got {
				full, err := st.GetMessage(context.Background(), m.ID)
				if err != nil {
					t.Fatal(err)
				}
				i := index[m.PayloadSHA256]
				if full.Queue != queue || full.SourceKind != quarantine.SourceRabbitMQ || full.Source != "fmt" {
					t.Errorf("message %d: queue %q kind %q source %q", i, full.Queue, full.SourceKind, full.Source)
				}
				tc.check(t, full, i, queue)
			}
			if s := c.Stats(); s.Stored != n || s.Duplicates != 0 {
				t.Errorf("stats %+v", s)
			}
		})
	}
}

func TestCollectorHostileMessages(t *testing.T) {
	t.Parallel()
	b := newBroker(t)
	dlq := b.failureQueue(nil)
	big := make([]byte, 5<<20)
	for i := range big {
		big[i] = byte(i*7 + i>>11)
	}
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	many := amqp.Table{}
	for i := range 1000 {
		many[fmt.Sprintf("h-%04d", i)] = fmt.Sprint(i)
	}
	hostile := []struct {
		name  string
		p     amqp.Publishing
		flags []string
	}{
		{"empty", amqp.Publishing{}, []string{quarantine.FlagMalformed}},
		{"binary", amqp.Publishing{Body: all}, []string{quarantine.FlagMalformed}},
		{"invalid utf8", amqp.Publishing{Body: []byte("\xff\xfe{\"a\":\xc3}")}, []string{quarantine.FlagMalformed}},
		{"5 MiB", amqp.Publishing{Body: big}, []string{quarantine.FlagMalformed}},
		{"1000 headers", amqp.Publishing{Body: []byte("many"), Headers: many}, []string{quarantine.FlagMalformed}},
		{"crlf headers", amqp.Publishing{Body: []byte("crlf"), Headers: amqp.Table{"x-note": "a\r\nSet-Cookie: x=y\r\n", "x-\r\nkey": "v"}}, []string{quarantine.FlagMalformed}},
		{"invalid utf8 header", amqp.Publishing{Body: []byte("hdr"), Headers: amqp.Table{"x-bad": "\xff\xfe"}}, []string{quarantine.FlagMalformed, quarantine.FlagInvalidUTF8}},
		{"x-death fields missing", amqp.Publishing{Body: []byte("sparse"), Headers: amqp.Table{"x-death": []any{amqp.Table{}}}}, []string{quarantine.FlagMalformed}},
		{"x-death wrong type", amqp.Publishing{Body: []byte("wrong"), Headers: amqp.Table{"x-death": "yes", "x-first-death-queue": "orders"}}, []string{quarantine.FlagMalformed}},
		{"broken envelope", amqp.Publishing{Body: []byte(`{"envelope":"quarantine.failure/v1","job":{`)}, []string{quarantine.FlagMalformed}},
	}
	var published []amqp.Publishing
	for i := range hostile {
		hostile[i].p.MessageId = "hostile-" + hostile[i].name
		published = append(published, hostile[i].p)
	}
	good := numbered("good", 50, nil)
	published = append(published, good...)
	b.publish(dlq, published...)

	st := testStore(t)
	src := testSource(t, "hostile", dlq, nil)
	c, stop := runCollector(t, "hostile", src, st, 4)
	waitStored(t, c, len(published), 60*time.Second)
	stop()
	b.waitDepth(dlq, 0)
	got := exactlyOnce(t, st, "hostile", bodiesOf(published))
	byID := map[string]*quarantine.Message{}
	for _, m := range got {
		byID[m.MessageID] = m
	}
	for _, h := range hostile {
		m := byID["hostile-"+h.name]
		if m == nil {
			t.Fatalf("%s: not stored", h.name)
		}
		full, err := st.GetMessage(context.Background(), m.ID)
		if err != nil {
			t.Fatal(err)
		}
		if full.PayloadSHA256 != quarantine.PayloadHash(h.p.Body) || string(full.Payload) != string(h.p.Body) {
			t.Errorf("%s: payload not byte-exact (%d bytes stored, %d sent)", h.name, len(full.Payload), len(h.p.Body))
		}
		for _, f := range h.flags {
			if !full.HasFlag(f) {
				t.Errorf("%s: flag %s missing from %v", h.name, f, full.Flags)
			}
		}
		if full.Reason == "" {
			t.Errorf("%s: no reason", h.name)
		}
	}
	if m, _ := st.GetMessage(context.Background(), byID["hostile-1000 headers"].ID); len(m.Headers) != 1000 {
		t.Errorf("1000 headers: %d stored", len(m.Headers))
	}
	if m, _ := st.GetMessage(context.Background(), byID["hostile-crlf headers"].ID); m.Headers["x-note"] != "a\r\nSet-Cookie: x=y\r\n" {
		t.Errorf("crlf header value changed: %q", m.Headers["x-note"])
	}
}

func TestCollectorReconnectsWhenTheBrokerClosesTheConnection(t *testing.T) {
	t.Parallel()
	const n = 3000
	b := newBroker(t)
	dlq := b.failureQueue(nil)
	published := numbered("rc", n, nil)
	b.publish(dlq, published...)
	name := "reconnect-" + b.name("c")[3:]
	st := testStore(t)
	src := testSource(t, name, dlq, nil)
	c, stop := runCollector(t, name, src, slowStore{st, 60 * time.Millisecond}, 50)
	closed := 0
	for _, at := range []int{n / 5, 2 * n / 5, 3 * n / 5} {
		waitStored(t, c, at, 60*time.Second)
		closed += closeConnections(t, name)
	}
	waitStored(t, c, n, 60*time.Second)
	stop()
	b.waitDepth(dlq, 0)
	exactlyOnce(t, st, name, bodiesOf(published))
	s := c.Stats()
	if closed < 2 || s.Errors[collect.ErrReceive]+s.Errors[collect.ErrAck] == 0 {
		t.Fatalf("closed %d connections; stats %+v", closed, s)
	}
	t.Logf("closed %d connections; %d duplicates absorbed; errors %v", closed, s.Duplicates, s.Errors)
}

func TestTwoCollectorsOnOneQueue(t *testing.T) {
	t.Parallel()
	const n = 3000
	b := newBroker(t)
	dlq := b.failureQueue(nil)
	published := numbered("twin", n, nil)
	b.publish(dlq, published...)
	// Two replicas run the same configuration: same collector name.
	name := "twin-" + b.name("c")[3:]
	st := testStore(t)
	c1, stop1 := runCollector(t, name, testSource(t, name, dlq, nil), slowStore{st, 20 * time.Millisecond}, 50)
	c2, stop2 := runCollector(t, name, testSource(t, name, dlq, nil), slowStore{st, 20 * time.Millisecond}, 50)
	total := func() int { return int(c1.Stats().Stored + c2.Stats().Stored) }
	for deadline := time.Now().Add(30 * time.Second); total() < n/3; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("stored %d", total())
		}
	}
	closeConnections(t, name) // both: their unacknowledged deliveries go to whichever reconnects first
	for deadline := time.Now().Add(60 * time.Second); total() < n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("stored %d of %d", total(), n)
		}
	}
	stop1()
	stop2()
	b.waitDepth(dlq, 0)
	exactlyOnce(t, st, name, bodiesOf(published))
	if c1.Stats().Stored == 0 || c2.Stats().Stored == 0 {
		t.Errorf("one collector did all the work: %d and %d", c1.Stats().Stored, c2.Stats().Stored)
	}
}

package rabbitmq

import (
	"context"
	"fmt"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
)

// Native dead letters carrying the usual idempotency headers, under any of
// their names and in any case, are stored with that key by a collector
// configured with no idempotency rule; a message with none of them is
// still flagged.
func TestCollectorTakesTheKeyFromTheUsualHeadersWithoutARule(t *testing.T) {
	t.Parallel()
	b := newBroker(t)
	dlq := b.failureQueue(nil)
	work := b.workQueue(dlq, nil)
	names := []string{"x-idempotency-key", "X-Idempotency-Key", "idempotency-key", "IDEMPOTENCY_KEY", "x-other-key"}
	ps := numbered("dk", len(names), func(i int, p *amqp.Publishing) {
		p.Headers = amqp.Table{names[i]: fmt.Sprint("key-", i)}
	})
	b.publish(work, ps...)
	b.settle(work, len(ps), false)
	b.waitDepth(dlq, len(ps))

	st := testStore(t)
	src := testSource(t, "dk", dlq, nil)
	c := collect.New(collect.Config{Name: "dk", Source: src, Store: st, BatchSize: 8, Linger: 20 * time.Millisecond,
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 500 * time.Millisecond, Logger: testLogger(t),
		Preparer: &collect.Preparer{}}) // no idempotency rule at all
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	waitStored(t, c, len(ps), 30*time.Second)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := stored(t, st, "dk")
	if len(got) != len(ps) {
		t.Fatalf("stored %d, want %d", len(got), len(ps))
	}
	keyed := 0
	for _, m := range got {
		full, err := st.GetMessage(context.Background(), m.ID)
		if err != nil {
			t.Fatal(err)
		}
		var i int
		if _, err := fmt.Sscanf(string(full.Payload), "dk-%d", &i); err != nil || i >= len(names) {
			t.Fatalf("payload %q is not one published", full.Payload)
		}
		if full.KeyRule != quarantine.KeyRuleDefault {
			t.Errorf("message %d: key rule %q, want %q", i, full.KeyRule, quarantine.KeyRuleDefault)
		}
		if names[i] == "x-other-key" {
			if full.IdempotencyKey != "" || !full.HasFlag(quarantine.FlagMissingIdempotencyKey) {
				t.Errorf("x-other-key is not a usual header: key %q flags %v", full.IdempotencyKey, full.Flags)
			}
			continue
		}
		if full.IdempotencyKey != fmt.Sprint("key-", i) || full.HasFlag(quarantine.FlagMissingIdempotencyKey) {
			t.Errorf("header %s: key %q flags %v", names[i], full.IdempotencyKey, full.Flags)
		}
		keyed++
	}
	if keyed != len(names)-1 {
		t.Fatalf("%d messages keyed, want %d", keyed, len(names)-1)
	}
}

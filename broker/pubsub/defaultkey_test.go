package pubsub

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	ps "cloud.google.com/go/pubsub/v2"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
)

// Dead letters whose attributes hold one of the usual idempotency keys,
// under any of their names and in any case, are stored with it by a
// collector configured with no idempotency rule (rule default-headers),
// forwarded by a dead-letter policy or not; a message with none of them
// is stored without a key and flagged.
func TestCollectorTakesTheKeyFromTheUsualAttributesWithoutARule(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.topic("orders")
	s.topic("orders.dlq")
	s.subscription("orders-worker", "orders", "", 0)
	s.subscription("orders.dlq-quarantine", "orders.dlq", "", 0)
	names := []string{"x-idempotency-key", "X-Idempotency-Key", "idempotency-key", "IDEMPOTENCY_KEY", "idempotency_key", "x-other-key"}
	var ms []*ps.Message
	for i, n := range names {
		attrs := map[string]string{n: fmt.Sprint("key-", i)}
		ms = append(ms,
			&ps.Message{Data: fmt.Appendf(nil, "raw-%d", i), Attributes: attrs},
			forwarded(&ps.Message{Data: fmt.Appendf(nil, "forwarded-%d", i), Attributes: attrs}, "orders-worker", "5", time.Now()))
	}
	s.publish("orders.dlq", ms...)

	st := openStore(t)
	src, err := NewSource("dk", s.config("orders.dlq-quarantine"), quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	c := collect.New(collect.Config{Name: "dk", Source: src, Store: st, BatchSize: 4, Linger: 20 * time.Millisecond,
		MaxBackoff: 500 * time.Millisecond, Logger: quietLogger(),
		Preparer: &collect.Preparer{}}) // no idempotency rule at all
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	eventually(t, 10*time.Second, "every message stored", func() bool { return len(allMessages(t, st, "dk")) == len(ms) })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, m := range allMessages(t, st, "dk") {
		full, err := st.GetMessage(context.Background(), m.ID)
		if err != nil {
			t.Fatal(err)
		}
		kind, n, _ := strings.Cut(string(full.Payload), "-")
		i, err := strconv.Atoi(n)
		if err != nil || i >= len(names) {
			t.Fatalf("payload %q", full.Payload)
		}
		seen[string(full.Payload)] = true
		want := fmt.Sprint("key-", i)
		if names[i] == "x-other-key" {
			want = ""
		}
		if full.IdempotencyKey != want || full.KeyRule != quarantine.KeyRuleDefault || full.HasFlag(quarantine.FlagMissingIdempotencyKey) != (want == "") {
			t.Errorf("%s message, attribute %s: key %q rule %q flags %v", kind, names[i], full.IdempotencyKey, full.KeyRule, full.Flags)
		}
		if wantQueue := map[string]string{"raw": "", "forwarded": "orders"}[kind]; full.Queue != wantQueue {
			t.Errorf("%s message %d: queue %q, want %q", kind, i, full.Queue, wantQueue)
		}
	}
	if len(seen) != len(ms) {
		t.Errorf("stored %d distinct messages of %d", len(seen), len(ms))
	}
}

package kafka

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
)

// Dead letters carrying one of the usual idempotency headers, under any
// of their names and in any case, are stored with that key by a collector
// configured with no idempotency rule (rule default-headers), whatever
// their format; a record with none of them is stored without a key and
// flagged.
func TestCollectorTakesTheKeyFromTheUsualHeadersWithoutARule(t *testing.T) {
	t.Parallel()
	k := newCluster(t, 1, "dk.DLT")
	orig := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	names := []string{"x-idempotency-key", "X-Idempotency-Key", "idempotency-key", "IDEMPOTENCY_KEY", "idempotency_key", "x-other-key"}
	var rs []*kgo.Record
	for i, n := range names {
		// The same header on a raw record, a Spring dead letter and a
		// Connect one (less the x-idempotency-key connectRecord sets).
		raw := &kgo.Record{Topic: "dk.DLT", Value: fmt.Appendf(nil, "raw-%d", i)}
		spring := springRecord("dk.DLT", "orders", 0, int64(i), nil, fmt.Appendf(nil, "spring-%d", i), orig,
			"org.springframework.kafka.listener.ListenerExecutionFailedException", "boom")
		connect := connectRecord("dk.DLT", "orders", 0, int64(i), nil, fmt.Appendf(nil, "connect-%d", i), orig,
			"VALUE_CONVERTER", "org.apache.kafka.connect.errors.DataException", "boom")
		connect.Headers = connect.Headers[1:]
		for _, r := range []*kgo.Record{raw, spring, connect} {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: n, Value: fmt.Appendf(nil, "key-%d", i)})
			rs = append(rs, r)
		}
	}
	k.produce(rs...)

	st := openStore(t)
	src, err := NewSource("dk", k.config("dk", "dk.DLT"), quietLogger())
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
	eventually(t, 10*time.Second, "every record stored", func() bool { return len(allMessages(t, st, "dk")) == len(rs) })
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
		seen[fmt.Sprint(kind, i)] = true
		want := fmt.Sprint("key-", i)
		if names[i] == "x-other-key" {
			want = ""
		}
		if full.IdempotencyKey != want || full.KeyRule != quarantine.KeyRuleDefault || full.HasFlag(quarantine.FlagMissingIdempotencyKey) != (want == "") {
			t.Errorf("%s record, header %s: key %q rule %q flags %v", kind, names[i], full.IdempotencyKey, full.KeyRule, full.Flags)
		}
		if wantQueue := map[string]string{"raw": "", "spring": "orders", "connect": "orders"}[kind]; full.Queue != wantQueue {
			t.Errorf("%s record %d: queue %q, want %q", kind, i, full.Queue, wantQueue)
		}
	}
	if len(seen) != len(rs) {
		t.Errorf("stored %d distinct records of %d: %v", len(seen), len(rs), seen)
	}
}

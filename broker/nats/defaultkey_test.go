package nats

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
)

// Failed messages carrying one of the usual idempotency headers, in any
// case, are stored with that key by a collector with no idempotency rule.
func TestCollectorTakesTheKeyFromTheUsualHeadersWithoutARule(t *testing.T) {
	t.Parallel()
	servers(t, func(t *testing.T, url string) {
		_, js := jsClient(t, url)
		stream := uniq("FAILED")
		newStream(t, js, jetstream.StreamConfig{Name: stream})
		names := []string{"Idempotency-Key", "IDEMPOTENCY_KEY", "x-idempotency-key", "X-Other"}
		for i, h := range names {
			m := nats.NewMsg(stream + ".orders")
			m.Data = fmt.Appendf(nil, "raw-%d", i)
			m.Header.Set(h, fmt.Sprint("key-", i))
			if _, err := js.PublishMsg(context.Background(), m); err != nil {
				t.Fatal(err)
			}
		}
		st := openStore(t)
		r := runCollectorWith(t, "dk", Config{URL: url, Stream: stream}, st, nil, 10, &collect.Preparer{})
		eventually(t, 20*time.Second, "stored", func() bool { return storedCount(t, st, "dk") == len(names) })
		r.stop()
		for _, m := range allMessages(t, st, "dk") {
			full, err := st.GetMessage(context.Background(), m.ID)
			if err != nil {
				t.Fatal(err)
			}
			var i int
			if _, err := fmt.Sscanf(string(full.Payload), "raw-%d", &i); err != nil || i >= len(names) {
				t.Fatalf("payload %q", full.Payload)
			}
			want := fmt.Sprint("key-", i)
			if names[i] == "X-Other" {
				want = ""
			}
			if full.IdempotencyKey != want || full.KeyRule != quarantine.KeyRuleDefault || full.HasFlag(quarantine.FlagMissingIdempotencyKey) != (want == "") {
				t.Errorf("header %s: key %q rule %q flags %v", names[i], full.IdempotencyKey, full.KeyRule, full.Flags)
			}
		}
	})
}

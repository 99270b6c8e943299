package sqs

import (
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
)

// Dead letters whose message attributes hold one of the usual
// idempotency keys, in any case, are stored with it by a collector with
// no idempotency rule.
func TestCollectorTakesTheKeyFromTheUsualAttributesWithoutARule(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, url := e.queue("dk", nil)
	names := []string{"Idempotency-Key", "X-IDEMPOTENCY-KEY", "idempotency_key", "x-other"}
	for i, n := range names {
		e.sendOne(url, fmt.Sprintf("raw-%d", i), map[string]types.MessageAttributeValue{
			n: {DataType: aws.String("String"), StringValue: aws.String(fmt.Sprint("key-", i))}})
	}
	st := sqliteStore(t)
	r := startCollector(t, "dk", testConfig(e.endpoint, url), st, &collect.Preparer{})
	eventually(t, 30*time.Second, "stored", func() bool { return len(allMessages(t, st, false)) == len(names) })
	r.stop()
	for _, m := range allMessages(t, st, true) {
		var i int
		if _, err := fmt.Sscanf(string(m.Payload), "raw-%d", &i); err != nil || i >= len(names) {
			t.Fatalf("payload %q", m.Payload)
		}
		want := fmt.Sprint("key-", i)
		if names[i] == "x-other" {
			want = ""
		}
		if m.IdempotencyKey != want || m.KeyRule != quarantine.KeyRuleDefault {
			t.Errorf("attribute %s: key %q rule %q", names[i], m.IdempotencyKey, m.KeyRule)
		}
	}
}

package collect_test

import (
	"testing"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
)

func TestPreparer(t *testing.T) {
	t.Parallel()
	p := &collect.Preparer{
		Owners: []quarantine.OwnerRule{{Team: "payments", Queues: []string{"orders*"}}},
		Idempotency: []collect.IdempotencyRule{
			{Queues: []string{"reports"}, Header: "x-idempotency-key"},
			{Queues: []string{"orders"}, JSONPointer: "/order/id", Prefix: "order:"},
			{Queues: []string{"tilde"}, JSONPointer: "/a~1b/m~0n"},
			{Queues: []string{"lines"}, JSONPointer: "/items/1/id"},
			{Queues: []string{"zero"}, JSONPointer: "/items/01/id"},
		},
	}
	cases := []struct {
		name, queue, key string
		payload          string
		headers          map[string]string
		want, owner      string
		rule             string
	}{
		{"header rule, any case", "reports", "", ``, map[string]string{"X-Idempotency-Key": "r-1"}, "r-1", "", "header:x-idempotency-key"},
		{"pointer with prefix", "orders", "", `{"order":{"id":"A7"}}`, nil, "order:A7", "payments", "pointer:/order/id prefix:order:"},
		{"pointer to a number", "orders", "", `{"order":{"id":12345678901234567890}}`, nil, "order:12345678901234567890", "payments", "pointer:/order/id prefix:order:"},
		{"escaped pointer", "tilde", "", `{"a/b":{"m~n":"x"}}`, nil, "x", "", "pointer:/a~1b/m~0n"},
		{"missing member", "orders", "", `{"order":{}}`, nil, "", "payments", "pointer:/order/id prefix:order:"},
		{"object is not a key", "orders", "", `{"order":{"id":{"x":1}}}`, nil, "", "payments", "pointer:/order/id prefix:order:"},
		{"payload not JSON", "orders", "", "\xff\x00", nil, "", "payments", "pointer:/order/id prefix:order:"},
		{"envelope key wins", "orders", "given", `{"order":{"id":"A7"}}`, nil, "given", "payments", quarantine.KeyRuleEnvelope},
		{"array index", "lines", "", `{"items":[{"id":"a"},{"id":"b"}]}`, nil, "b", "", "pointer:/items/1/id"},
		// RFC 6901: "01" is no array index; redaction reads it the same way.
		{"leading zero names nothing", "zero", "", `{"items":[{"id":"a"},{"id":"b"}]}`, nil, "", "", "pointer:/items/01/id"},
		{"no rule, no usual header", "other", "", `{"order":{"id":"A7"}}`, map[string]string{"x-key": "k"}, "", "", quarantine.KeyRuleDefault},
		{"no rule: x-idempotency-key", "other", "", ``, map[string]string{"X-IDEMPOTENCY-KEY": "d-1"}, "d-1", "", quarantine.KeyRuleDefault},
		{"no rule: idempotency-key", "other", "", ``, map[string]string{"Idempotency-Key": "d-2"}, "d-2", "", quarantine.KeyRuleDefault},
		{"no rule: idempotency_key", "other", "", ``, map[string]string{"IDEMPOTENCY_KEY": "d-3"}, "d-3", "", quarantine.KeyRuleDefault},
		{"no rule: x-idempotency-key first", "other", "", ``, map[string]string{"idempotency_key": "late", "x-idempotency-key": "first"}, "first", "", quarantine.KeyRuleDefault},
		{"no rule: an empty header is no key", "other", "", ``, map[string]string{"x-idempotency-key": "", "idempotency-key": "d-4"}, "d-4", "", quarantine.KeyRuleDefault},
		{"a rule overrides the usual headers", "orders", "", `{"order":{"id":"A7"}}`, map[string]string{"x-idempotency-key": "hdr"}, "order:A7", "payments", "pointer:/order/id prefix:order:"},
		{"a rule that finds nothing does not fall back", "orders", "", `{}`, map[string]string{"x-idempotency-key": "hdr"}, "", "payments", "pointer:/order/id prefix:order:"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := &quarantine.Message{Queue: tc.queue, IdempotencyKey: tc.key, Payload: []byte(tc.payload), Headers: tc.headers}
			p.Prepare(m)
			if m.KeyRule != tc.rule {
				t.Errorf("KeyRule = %q, want %q", m.KeyRule, tc.rule)
			}
			if m.KeyRule != quarantine.KeyRuleEnvelope && p.KeyRule(tc.queue) != m.KeyRule {
				t.Errorf("Preparer.KeyRule(%q) = %q, the message recorded %q", tc.queue, p.KeyRule(tc.queue), m.KeyRule)
			}
			if m.IdempotencyKey != tc.want || m.Owner != tc.owner {
				t.Fatalf("key %q owner %q, want %q %q", m.IdempotencyKey, m.Owner, tc.want, tc.owner)
			}
		})
	}
}

func TestPreparerRedactsHeaders(t *testing.T) {
	t.Parallel()
	m := &quarantine.Message{Headers: map[string]string{"Authorization": "Bearer x", "COOKIE": "s=1", "x-trace": "t"}}
	(&collect.Preparer{}).Prepare(m)
	if m.Headers["Authorization"] != collect.RedactedValue || m.Headers["COOKIE"] != collect.RedactedValue || m.Headers["x-trace"] != "t" {
		t.Fatalf("default redaction: %v", m.Headers)
	}
	m = &quarantine.Message{Headers: map[string]string{"Authorization": "Bearer x", "x-api-key": "k"}}
	(&collect.Preparer{RedactHeaders: []string{"X-Api-Key"}}).Prepare(m)
	if m.Headers["Authorization"] != "Bearer x" || m.Headers["x-api-key"] != collect.RedactedValue {
		t.Fatalf("configured redaction: %v", m.Headers)
	}
}

func TestIdempotencyRuleValidate(t *testing.T) {
	t.Parallel()
	bad := map[string]collect.IdempotencyRule{
		"queues":       {Header: "h"},
		"queues[0]":    {Queues: []string{"["}, Header: "h"},
		"header":       {Queues: []string{"q"}},
		"json_pointer": {Queues: []string{"q"}, JSONPointer: "order_id"},
	}
	for field, r := range bad {
		if err := r.Validate(); quarantine.ErrorField(err) != field {
			t.Errorf("%s: %v", field, err)
		}
	}
	both := collect.IdempotencyRule{Queues: []string{"q"}, Header: "h", JSONPointer: "/a"}
	if both.Validate() == nil {
		t.Error("both header and pointer accepted")
	}
	ok := collect.IdempotencyRule{Queues: []string{"q"}, JSONPointer: "/a"}
	if err := ok.Validate(); err != nil {
		t.Error(err)
	}
}

func TestPayloadKey(t *testing.T) {
	t.Parallel()
	p := &collect.Preparer{Idempotency: []collect.IdempotencyRule{
		{Queues: []string{"reports"}, Header: "x-key"},
		{Queues: []string{"orders"}, JSONPointer: "/id", Prefix: "o:"},
	}}
	if k, ok := p.PayloadKey("orders", []byte(`{"id":"7"}`)); k != "o:7" || !ok {
		t.Fatalf("orders: %q %v", k, ok)
	}
	if k, ok := p.PayloadKey("orders", []byte(`{}`)); k != "" || !ok {
		t.Fatalf("orders without id: %q %v", k, ok)
	}
	if _, ok := p.PayloadKey("reports", []byte(`{"id":"7"}`)); ok {
		t.Fatal("a header rule does not derive from the payload")
	}
	if _, ok := p.PayloadKey("other", nil); ok {
		t.Fatal("no rule")
	}
}

func TestPreparerFlagsLargePayloads(t *testing.T) {
	t.Parallel()
	p := &collect.Preparer{MaxPayloadBytes: 4}
	small, large := &quarantine.Message{Payload: []byte("1234")}, &quarantine.Message{Payload: []byte("12345")}
	p.Prepare(small)
	p.Prepare(large)
	if small.HasFlag(quarantine.FlagPayloadTooLarge) || !large.HasFlag(quarantine.FlagPayloadTooLarge) || string(large.Payload) != "12345" {
		t.Fatalf("small %v, large %v %q", small.Flags, large.Flags, large.Payload)
	}
}

func TestNilPreparerTakesTheUsualHeaders(t *testing.T) {
	t.Parallel()
	var p *collect.Preparer
	m := &quarantine.Message{Queue: "q", Headers: map[string]string{"Idempotency-Key": "k1"}}
	p.Prepare(m)
	if m.IdempotencyKey != "k1" || m.KeyRule != quarantine.KeyRuleDefault || p.KeyRule("q") != quarantine.KeyRuleDefault {
		t.Fatalf("key %q rule %q", m.IdempotencyKey, m.KeyRule)
	}
	if got := p.Key("q", map[string]string{"x-idempotency-key": "k2"}, nil); got != "k2" {
		t.Fatalf("Key = %q", got)
	}
}

func TestSameKeyRule(t *testing.T) {
	t.Parallel()
	if !quarantine.SameKeyRule(quarantine.KeyRuleNone, quarantine.KeyRuleDefault) || !quarantine.SameKeyRule("", quarantine.KeyRuleDefault) {
		t.Fatal("a message collected before the default headers reads as collected under them")
	}
	if quarantine.SameKeyRule("header:x-id", quarantine.KeyRuleDefault) {
		t.Fatal("a configured rule is not the default")
	}
}

package sqs

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/quarantine-dev/quarantine"
)

// TestHostileMessagesStoredRawAndFlagged sends what a hostile or broken
// producer can put on a queue, with ordinary messages behind it, and checks
// that every body is stored byte-exact (same SHA-256) and flagged where
// something was wrong, and that the ordinary ones still flow.
//
// Some cases go beyond what real SQS accepts (an empty body, a 5 MiB body,
// 1,000 attributes): goaws takes them, so the collector must cope. Bytes
// that XML cannot carry (binary, invalid UTF-8) never reach a receiver
// intact on any SQS; the decoder's tests cover them, and one case here
// checks that such an altered body is stored as received and noted.
func TestHostileMessagesStoredRawAndFlagged(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, url := e.queue("hostile", map[string]string{"MaximumMessageSize": fmt.Sprint(6 << 20)})
	str := func(s string) types.MessageAttributeValue {
		return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(s)}
	}
	many := map[string]types.MessageAttributeValue{}
	for i := range 1000 {
		many[fmt.Sprintf("h%04d", i)] = str(fmt.Sprint(i))
	}
	big := strings.Repeat("0123456789abcdef", 5<<20/16) // 5 MiB

	cases := []struct {
		name   string
		body   string
		attrs  map[string]types.MessageAttributeValue
		class  quarantine.FailureClass
		flags  []string
		reason string // substring
		stored string // the body SQS delivers, when it differs from the one sent
		check  func(t *testing.T, m *quarantine.Message)
	}{
		{name: "empty body", body: "", class: quarantine.ClassMalformed, flags: []string{quarantine.FlagMalformed}, reason: "empty message body"},
		{name: "not json", body: "}{ not json at all", class: quarantine.ClassExhausted},
		{name: "broken envelope", body: `{"envelope":"quarantine.failure/v1","job":[]}`, class: quarantine.ClassMalformed,
			flags: []string{quarantine.FlagMalformed}, reason: "job must be a JSON object"},
		{name: "unknown envelope", body: `{"envelope":"other/v1"}`, class: quarantine.ClassMalformed,
			flags: []string{quarantine.FlagMalformed, quarantine.FlagUnknownEnvelope}},
		{name: "xml and script", body: `<script>alert(1)</script>]]><![CDATA[&amp;`, class: quarantine.ClassExhausted},
		{name: "5 MiB body", body: big, class: quarantine.ClassExhausted},
		{name: "1000 headers", body: `{"order_id":"many"}`, attrs: many, class: quarantine.ClassExhausted,
			check: func(t *testing.T, m *quarantine.Message) {
				if len(m.Headers) != 1000 || m.Headers["h0999"] != "999" {
					t.Errorf("%d headers stored, h0999=%q", len(m.Headers), m.Headers["h0999"])
				}
			}},
		{name: "CRLF in header values", body: `{"order_id":"crlf"}`, class: quarantine.ClassExhausted,
			attrs: map[string]types.MessageAttributeValue{"x-evil": str("a\r\nSet-Cookie: b=c\r\n\r\n<html>"), "content-type": str("text/x\r\ninjected: 1")},
			check: func(t *testing.T, m *quarantine.Message) {
				if m.Headers["x-evil"] != "a\r\nSet-Cookie: b=c\r\n\r\n<html>" || m.ContentType == "text/x\r\ninjected: 1" {
					t.Errorf("headers %q content type %q", m.Headers, m.ContentType)
				}
			}},
		{name: "control bytes altered in transit", body: "a\x01b", stored: "a\ufffdb", class: quarantine.ClassExhausted,
			reason: "differs from the MD5OfBody"},
	}
	ids := make([]string, len(cases))
	for i, tc := range cases {
		ids[i] = e.sendOne(url, tc.body, tc.attrs)
	}
	behind := e.send(url, bodies(50, "behind"), nil)

	st := sqliteStore(t)
	r := startCollector(t, "dlq-hostile", testConfig(e.endpoint, url), st, nil)
	eventually(t, 60*time.Second, "the queue to drain", func() bool { return e.depth(url) == 0 })
	r.stop()

	msgs := allMessages(t, st, true)
	exactlyOnce(t, msgs, append(append([]string{}, ids...), behind...), func(m *quarantine.Message) string { return m.MessageID })
	byID := map[string]*quarantine.Message{}
	for _, m := range msgs {
		byID[m.MessageID] = m
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := byID[ids[i]]
			want := tc.body
			if tc.stored != "" {
				want = tc.stored
			}
			if m.PayloadSHA256 != quarantine.PayloadHash([]byte(want)) || m.PayloadSize != len(want) {
				t.Errorf("payload sha %s size %d, want the body's %s size %d", m.PayloadSHA256, m.PayloadSize, quarantine.PayloadHash([]byte(want)), len(want))
			}
			if m.FailureClass != tc.class {
				t.Errorf("class %q, want %q (reason %q)", m.FailureClass, tc.class, m.Reason)
			}
			for _, f := range tc.flags {
				if !m.HasFlag(f) {
					t.Errorf("flags %v lack %s", m.Flags, f)
				}
			}
			if !strings.Contains(m.Reason, tc.reason) {
				t.Errorf("reason %q lacks %q", m.Reason, tc.reason)
			}
			if tc.check != nil {
				tc.check(t, m)
			}
		})
	}
}

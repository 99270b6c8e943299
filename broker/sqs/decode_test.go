package sqs

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
)

var testOrigin = origin{name: "billing-sqs", sourceQueue: "billing"}

// sqsMessage builds a received message: body (nil: no Body element),
// system attributes and the MD5 SQS would report.
func sqsMessage(body *string, attrs map[string]string) types.Message {
	m := types.Message{MessageId: aws.String("mid-1"), ReceiptHandle: aws.String("rh-1"), Body: body, Attributes: attrs}
	if body != nil {
		m.MD5OfBody = aws.String(md5Hex([]byte(*body)))
	}
	return m
}

const validEnvelope = `{"envelope":"quarantine.failure/v1",
 "job":{"id":"job-7","name":"send_invoice","queue":"invoices","idempotency_key":"inv-7","attempts":5,
        "headers":{"x-trace":"from-envelope"},"payload":{"invoice":7}},
 "failure":{"class":"permanent","reason":"card declined","failed_at":"2026-11-29T11:00:00Z"}}`

func TestDecode(t *testing.T) {
	t.Parallel()
	received := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	sent := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	firstReceive := time.Date(2026, 11, 29, 9, 5, 0, 0, time.UTC)
	movedAt := time.Date(2026, 11, 29, 9, 30, 0, 0, time.UTC)
	ms := func(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }
	// What AWS reports on the first receive from a dead-letter queue: the
	// source queue's 3 receives plus this one, and the source's times.
	counts := map[string]string{attrReceiveCount: "4", attrSentTimestamp: ms(sent), attrFirstReceive: ms(firstReceive)}
	// What goaws reports (and AWS for a message sent to the DLQ directly):
	// a first receive, sent just now.
	dlqSent := received.Add(-time.Second)
	fresh := map[string]string{attrReceiveCount: "1", attrSentTimestamp: ms(dlqSent), attrFirstReceive: ms(received)}
	str := aws.String

	cases := []struct {
		name    string
		msg     types.Message
		attrs   map[string]types.MessageAttributeValue
		check   func(t *testing.T, m *quarantine.Message)
		class   quarantine.FailureClass
		flags   []string
		reason  string // substring
		payload *string
		fifo    bool
	}{
		{name: "native json", msg: sqsMessage(str(`{"order_id":"o-1"}`), counts),
			class: quarantine.ClassExhausted, reason: "moved to DLQ by SQS redrive after 3 receives", payload: str(`{"order_id":"o-1"}`),
			check: func(t *testing.T, m *quarantine.Message) {
				if m.Attempts != 3 || m.ContentType != collect.ContentTypeJSON || m.MessageID != "mid-1" || m.Queue != "billing" {
					t.Errorf("attempts %d type %q id %q queue %q", m.Attempts, m.ContentType, m.MessageID, m.Queue)
				}
				if m.EnqueuedAt == nil || !m.EnqueuedAt.Equal(sent) || !m.FailedAt.Equal(received) ||
					m.FirstFailedAt == nil || !m.FirstFailedAt.Equal(firstReceive) {
					t.Errorf("enqueued %v first failed %v failed %v", m.EnqueuedAt, m.FirstFailedAt, m.FailedAt)
				}
			}},
		{name: "native after maxReceiveCount 1", msg: sqsMessage(str(`{}`), map[string]string{attrReceiveCount: "2"}),
			class: quarantine.ClassExhausted, reason: "moved to DLQ by SQS redrive after 1 receives",
			check: func(t *testing.T, m *quarantine.Message) {
				if m.Attempts != 1 || m.EnqueuedAt != nil || m.FirstFailedAt != nil || !m.FailedAt.Equal(received) {
					t.Errorf("attempts %d enqueued %v first failed %v failed %v", m.Attempts, m.EnqueuedAt, m.FirstFailedAt, m.FailedAt)
				}
			}},
		{name: "native first receive anywhere", msg: sqsMessage(str(`{}`), fresh),
			class: quarantine.ClassExhausted, reason: "moved to DLQ by SQS redrive (receives unknown: ApproximateReceiveCount 1 on the DLQ)",
			check: func(t *testing.T, m *quarantine.Message) {
				if m.Attempts != 0 || m.EnqueuedAt != nil || m.FirstFailedAt != nil || !m.FailedAt.Equal(dlqSent) {
					t.Errorf("attempts %d enqueued %v first failed %v failed %v", m.Attempts, m.EnqueuedAt, m.FirstFailedAt, m.FailedAt)
				}
			}},
		{name: "native times out of order", msg: sqsMessage(str(`{}`), map[string]string{attrReceiveCount: "3",
			attrSentTimestamp: ms(sent), attrFirstReceive: ms(received.Add(time.Hour))}),
			class: quarantine.ClassExhausted, check: func(t *testing.T, m *quarantine.Message) {
				if m.Attempts != 2 || m.FirstFailedAt != nil || !m.FailedAt.Equal(received) {
					t.Errorf("attempts %d first failed %v failed %v", m.Attempts, m.FirstFailedAt, m.FailedAt)
				}
			}},
		{name: "native fifo", fifo: true, class: quarantine.ClassExhausted,
			// A FIFO queue resets SentTimestamp to the move.
			msg: sqsMessage(str(`{}`), map[string]string{attrReceiveCount: "4", attrSentTimestamp: ms(movedAt), attrFirstReceive: ms(firstReceive)}),
			check: func(t *testing.T, m *quarantine.Message) {
				if m.EnqueuedAt != nil || !m.FailedAt.Equal(movedAt) || m.Attempts != 3 || m.FirstFailedAt == nil || !m.FirstFailedAt.Equal(firstReceive) {
					t.Errorf("enqueued %v first failed %v failed %v attempts %d", m.EnqueuedAt, m.FirstFailedAt, m.FailedAt, m.Attempts)
				}
			}},
		{name: "native text", msg: sqsMessage(str("plain words, <xml> & more\r\n"), counts),
			class: quarantine.ClassExhausted, payload: str("plain words, <xml> & more\r\n"),
			check: func(t *testing.T, m *quarantine.Message) {
				if m.ContentType != contentTypeText {
					t.Errorf("content type %q", m.ContentType)
				}
			}},
		{name: "content-type attribute wins", msg: sqsMessage(str(`<a/>`), counts),
			attrs: map[string]types.MessageAttributeValue{"Content-Type": {DataType: str("String"), StringValue: str("application/xml")}},
			class: quarantine.ClassExhausted, check: func(t *testing.T, m *quarantine.Message) {
				if m.ContentType != "application/xml" {
					t.Errorf("content type %q", m.ContentType)
				}
			}},
		{name: "content-type attribute with CRLF ignored", msg: sqsMessage(str(`x`), counts),
			attrs: map[string]types.MessageAttributeValue{"content-type": {DataType: str("String"), StringValue: str("text/x\r\nevil: 1")}},
			class: quarantine.ClassExhausted, check: func(t *testing.T, m *quarantine.Message) {
				if m.ContentType != contentTypeText || m.Headers["content-type"] != "text/x\r\nevil: 1" {
					t.Errorf("content type %q header %q", m.ContentType, m.Headers["content-type"])
				}
			}},
		{name: "no body", msg: sqsMessage(nil, counts), class: quarantine.ClassMalformed,
			flags: []string{quarantine.FlagMalformed}, reason: "empty message body", payload: str("")},
		{name: "invalid utf-8", msg: sqsMessage(str("ok\xff\xfe"), counts), class: quarantine.ClassMalformed,
			flags: []string{quarantine.FlagMalformed, quarantine.FlagInvalidUTF8}, reason: "not valid UTF-8 at offset 2", payload: str("ok\xff\xfe")},
		{name: "no receive count", msg: sqsMessage(str(`{}`), nil), class: quarantine.ClassExhausted,
			reason: "receive count not reported", check: func(t *testing.T, m *quarantine.Message) {
				if m.Attempts != 0 || m.EnqueuedAt != nil {
					t.Errorf("attempts %d enqueued %v", m.Attempts, m.EnqueuedAt)
				}
			}},
		{name: "unreadable receive count", msg: sqsMessage(str(`{}`), map[string]string{attrReceiveCount: "-3", attrSentTimestamp: "soon"}),
			class: quarantine.ClassExhausted, reason: `unreadable receive count "-3"`},
		{name: "envelope", msg: sqsMessage(str(validEnvelope), counts),
			attrs: map[string]types.MessageAttributeValue{
				"x-trace": {DataType: str("String"), StringValue: str("from-sqs")},
				"x-extra": {DataType: str("String"), StringValue: str("kept")}},
			class: quarantine.ClassPermanent, reason: "card declined", payload: str(`{"invoice":7}`),
			check: func(t *testing.T, m *quarantine.Message) {
				if m.Queue != "invoices" || m.JobName != "send_invoice" || m.IdempotencyKey != "inv-7" || m.Attempts != 5 || m.MessageID != "job-7" {
					t.Errorf("queue %q job %q key %q attempts %d id %q", m.Queue, m.JobName, m.IdempotencyKey, m.Attempts, m.MessageID)
				}
				if m.Headers["x-trace"] != "from-envelope" || m.Headers["x-extra"] != "kept" {
					t.Errorf("headers %v", m.Headers)
				}
				if !m.FailedAt.Equal(time.Date(2026, 11, 29, 11, 0, 0, 0, time.UTC)) {
					t.Errorf("failed at %v", m.FailedAt)
				}
			}},
		{name: "envelope without queue or failure time", msg: sqsMessage(str(`{"envelope":"quarantine.failure/v1","job":{"name":"a","payload":1},"failure":{"class":"permanent"}}`), counts),
			class: quarantine.ClassPermanent, check: func(t *testing.T, m *quarantine.Message) {
				if m.Queue != "billing" || !m.FailedAt.Equal(sent) {
					t.Errorf("queue %q failed at %v", m.Queue, m.FailedAt)
				}
			}},
		{name: "truncated envelope", msg: sqsMessage(str(`{"envelope":"quarantine.failure/v1","job":{"name":`), counts),
			class: quarantine.ClassMalformed, flags: []string{quarantine.FlagMalformed}, reason: "invalid JSON",
			payload: str(`{"envelope":"quarantine.failure/v1","job":{"name":`)},
		{name: "unknown envelope version", msg: sqsMessage(str(`{"envelope":"quarantine.failure/v9"}`), counts),
			class: quarantine.ClassMalformed, flags: []string{quarantine.FlagMalformed, quarantine.FlagUnknownEnvelope},
			payload: str(`{"envelope":"quarantine.failure/v9"}`)},
		{name: "envelope word as a value is native", msg: sqsMessage(str(`{"kind":"envelope","x":{"envelope":1}}`), counts),
			class: quarantine.ClassExhausted, payload: str(`{"kind":"envelope","x":{"envelope":1}}`)},
		{name: "md5 mismatch", msg: func() types.Message {
			m := sqsMessage(str("abc"), counts)
			m.MD5OfBody = str("00000000000000000000000000000000")
			return m
		}(), class: quarantine.ClassExhausted, reason: "differs from the MD5OfBody", payload: str("abc")},
		{name: "no message id", msg: func() types.Message {
			m := sqsMessage(str("abc"), counts)
			m.MessageId = nil
			return m
		}(), class: quarantine.ClassExhausted, reason: "no MessageId", check: func(t *testing.T, m *quarantine.Message) {
			if m.DedupeKey != "" || m.MessageID != "" {
				t.Errorf("dedupe %q id %q", m.DedupeKey, m.MessageID)
			}
		}},
		{name: "attribute kinds", msg: sqsMessage(str("x"), counts),
			attrs: map[string]types.MessageAttributeValue{
				"s":     {DataType: str("String.custom"), StringValue: str("v")},
				"n":     {DataType: str("Number"), StringValue: str("1.5")},
				"b":     {DataType: str("Binary"), BinaryValue: []byte("\x00\xff")},
				"sl":    {DataType: str("String"), StringListValues: []string{"a", "b"}},
				"empty": {DataType: str("String")},
			},
			class: quarantine.ClassExhausted, check: func(t *testing.T, m *quarantine.Message) {
				want := map[string]string{"s": "v", "n": "1.5", "b": `"AP8="`, "sl": `["a","b"]`, "empty": ""}
				for k, v := range want {
					if got, ok := m.Headers[k]; !ok || got != v {
						t.Errorf("header %s = %q, want %q", k, got, v)
					}
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.msg.MessageAttributes = tc.attrs
			o := testOrigin
			o.fifo = tc.fifo
			m := decode(o, tc.msg, received)
			if m.Source != "billing-sqs" || m.SourceKind != quarantine.SourceSQS {
				t.Errorf("source %q kind %q", m.Source, m.SourceKind)
			}
			if tc.msg.MessageId != nil && m.DedupeKey != *tc.msg.MessageId {
				t.Errorf("dedupe key %q, want the MessageId", m.DedupeKey)
			}
			if m.FailureClass != tc.class {
				t.Errorf("class %q, want %q (reason %q)", m.FailureClass, tc.class, m.Reason)
			}
			for _, f := range tc.flags {
				if !m.HasFlag(f) {
					t.Errorf("flags %v lack %s", m.Flags, f)
				}
			}
			if len(tc.flags) == 0 && len(m.Flags) != 0 {
				t.Errorf("unexpected flags %v", m.Flags)
			}
			if !strings.Contains(m.Reason, tc.reason) {
				t.Errorf("reason %q lacks %q", m.Reason, tc.reason)
			}
			if tc.payload != nil && !bytes.Equal(m.Payload, []byte(*tc.payload)) {
				t.Errorf("payload %q, want %q", m.Payload, *tc.payload)
			}
			if m.Payload == nil || m.Flags == nil {
				t.Error("nil payload or flags")
			}
			if tc.check != nil {
				tc.check(t, m)
			}
		})
	}
}

func TestHasEnvelopeKey(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]bool{
		`{"envelope":"x"}`:                    true,
		`  {"a":[1,{"b":2}],"envelope":null}`: true,
		`{"envelope"`:                         true,
		`{"a":"envelope"}`:                    false,
		`{"a":{"envelope":1}}`:                false,
		`["envelope"]`:                        false,
		`{"a":1,}"envelope"`:                  false,
		`"envelope"`:                          false,
		``:                                    false,
	} {
		if got := hasEnvelopeKey([]byte(body)); got != want {
			t.Errorf("hasEnvelopeKey(%q) = %v, want %v", body, got, want)
		}
	}
}

// FuzzDecode checks the decoder's invariants on any body and attributes:
// it never panics, never changes its input, keeps every non-envelope body
// byte-exact, and always sets the origin, a valid class and the dedupe key.
// testdata/fuzz/FuzzDecode holds the seed corpus plain `go test` replays.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"order_id":1}`), "x-key", "v", "3", "1795683600000")
	f.Add([]byte(validEnvelope), "content-type", "application/json", "1", "")
	f.Add([]byte("\xff\x00"), "", "", "", "")
	f.Fuzz(func(t *testing.T, body []byte, attrName, attrValue, count, sent string) {
		in := bytes.Clone(body)
		s := string(body)
		msg := types.Message{MessageId: aws.String("mid"), Body: &s, MD5OfBody: aws.String(md5Hex(body)),
			Attributes: map[string]string{attrReceiveCount: count, attrSentTimestamp: sent}}
		if attrName != "" {
			msg.MessageAttributes = map[string]types.MessageAttributeValue{
				attrName: {DataType: aws.String("String"), StringValue: aws.String(attrValue)}}
		}
		m := decode(testOrigin, msg, time.Unix(0, 0))
		if !bytes.Equal(body, in) {
			t.Fatal("decode changed its input")
		}
		if m.Source != testOrigin.name || m.SourceKind != quarantine.SourceSQS || m.DedupeKey != "mid" || m.Queue == "" {
			t.Fatalf("origin not set: %+v", m)
		}
		if !m.FailureClass.Valid() || m.Reason == "" || m.Flags == nil || m.Payload == nil {
			t.Fatalf("class %q reason %q flags %v", m.FailureClass, m.Reason, m.Flags)
		}
		if (!hasEnvelopeKey(body) || m.FailureClass == quarantine.ClassMalformed) && !bytes.Equal(m.Payload, body) {
			t.Fatalf("payload %q is not the body %q", m.Payload, body)
		}
		if m.HasFlag(quarantine.FlagMalformed) != (m.FailureClass == quarantine.ClassMalformed) {
			t.Fatalf("flag/class disagree: %v %q", m.Flags, m.FailureClass)
		}
		payload := bytes.Clone(m.Payload)
		m.Normalize(time.Now())
		if !bytes.Equal(payload, m.Payload) {
			t.Fatal("Normalize changed the payload")
		}
	})
}

package rabbitmq

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/quarantine-dev/quarantine"
)

var deathTime = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// xdeath returns the headers RabbitMQ writes for one dead-lettering.
func xdeath(queue, reason string, count int64) amqp.Table {
	return amqp.Table{
		"x-death": []any{amqp.Table{
			"queue": queue, "reason": reason, "count": count, "time": deathTime,
			"exchange": "", "routing-keys": []any{queue},
		}},
		"x-first-death-queue": queue, "x-first-death-reason": reason, "x-first-death-exchange": "",
	}
}

// with returns t with more headers (a nil value deletes the header).
func with(t amqp.Table, kv ...any) amqp.Table {
	out := amqp.Table{}
	for k, v := range t {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(out, kv[i].(string))
		} else {
			out[kv[i].(string)] = kv[i+1]
		}
	}
	return out
}

const validEnvelope = `{"envelope":"quarantine.failure/v1","job":{"id":"job-7","name":"charge","queue":"payments",` +
	`"idempotency_key":"pay-7","attempts":4,"headers":{"x-trace":"t1"},"payload":{"amount":5}},` +
	`"failure":{"class":"exhausted","reason":"card declined","failed_at":"2026-11-29T09:00:00Z"}}`

func TestDecode(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		d       amqp.Delivery
		queue   string
		class   quarantine.FailureClass
		attempt int
		reason  string // substring
		flags   []string
		failed  time.Time
		job     string
	}{
		{name: "rejected", d: amqp.Delivery{Body: []byte(`{"order":1}`), Headers: xdeath("orders", "rejected", 3)},
			queue: "orders", class: quarantine.ClassRejected, attempt: 3, reason: "rejected from queue orders (x-death count 3)", failed: deathTime},
		{name: "expired", d: amqp.Delivery{Body: []byte("x"), Headers: xdeath("orders", "expired", 1)},
			queue: "orders", class: quarantine.ClassExpired, attempt: 1, reason: "expired from queue orders (x-death count 1)", failed: deathTime},
		{name: "maxlen is overflow", d: amqp.Delivery{Body: []byte("x"), Headers: xdeath("orders", "maxlen", 1)},
			queue: "orders", class: quarantine.ClassOverflow, attempt: 1, reason: "maxlen from queue orders", failed: deathTime},
		{name: "delivery limit", d: amqp.Delivery{Body: []byte("x"), Headers: xdeath("orders", "delivery_limit", 1), Type: "charge"},
			queue: "orders", class: quarantine.ClassDeliveryLimit, attempt: 1, reason: "delivery_limit from queue orders", failed: deathTime, job: "charge"},
		{name: "unknown reason", d: amqp.Delivery{Body: []byte("x"), Headers: xdeath("orders", "gremlins", 2)},
			queue: "orders", class: quarantine.ClassUnknown, attempt: 2, reason: `unknown reason "gremlins" from queue orders`, failed: deathTime},
		{name: "first death queue wins over the newest entry", d: amqp.Delivery{Body: []byte("x"),
			Headers: with(xdeath("orders.retry", "expired", 5), "x-first-death-queue", "orders")},
			queue: "orders", class: quarantine.ClassExpired, attempt: 5, reason: "expired from queue orders.retry", failed: deathTime},
		{name: "x-death missing", d: amqp.Delivery{Body: []byte("x"), Headers: amqp.Table{"x-first-death-queue": "orders", "x-first-death-reason": "rejected"}},
			queue: "orders", class: quarantine.ClassRejected, reason: "x-death is missing", flags: []string{quarantine.FlagMalformed}},
		{name: "x-death not an array", d: amqp.Delivery{Body: []byte("x"), Headers: with(xdeath("orders", "rejected", 1), "x-death", "oops")},
			queue: "orders", class: quarantine.ClassRejected, reason: "x-death must be an array, got a string", flags: []string{quarantine.FlagMalformed}},
		{name: "entry fields missing", d: amqp.Delivery{Body: []byte("x"), Headers: amqp.Table{"x-death": []any{amqp.Table{}}}},
			class: quarantine.ClassUnknown, reason: "x-death[0].queue is missing; x-death[0].reason is missing; x-death[0].count is missing; x-death[0].time is missing",
			flags: []string{quarantine.FlagMalformed}},
		{name: "entry fields ill-typed", d: amqp.Delivery{Body: []byte("x"), Headers: amqp.Table{"x-death": []any{
			amqp.Table{"queue": int32(4), "reason": "expired", "count": "three", "time": "yesterday"}, "not a table"},
			"x-first-death-queue": []byte("orders"), "x-first-death-reason": "expired"}},
			queue: "orders", class: quarantine.ClassExpired, reason: "x-death[0].queue must be a string, got an integer; x-death[0].count must be a non-negative integer, got a string; x-death[0].time must be a timestamp, got a string; x-death[1] must be a table, got a string",
			flags: []string{quarantine.FlagMalformed}},
		{name: "negative count", d: amqp.Delivery{Body: []byte("x"), Headers: with(xdeath("orders", "rejected", 1), "x-death", []any{amqp.Table{"queue": "orders", "reason": "rejected", "count": int64(-1), "time": deathTime}})},
			queue: "orders", class: quarantine.ClassRejected, reason: "count must be a non-negative integer", flags: []string{quarantine.FlagMalformed}, failed: deathTime},
		{name: "raw body", d: amqp.Delivery{Body: []byte("just bytes")},
			class: quarantine.ClassUnknown, reason: "neither a quarantine.failure/v1 envelope nor a RabbitMQ dead letter", flags: []string{quarantine.FlagMalformed}},
		{name: "envelope", d: amqp.Delivery{Body: []byte(validEnvelope), Headers: amqp.Table{"x-ignored": "1"}},
			queue: "payments", class: quarantine.ClassExhausted, attempt: 4, reason: "card declined", failed: time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC), job: "charge"},
		{name: "envelope dead-lettered keeps the envelope", d: amqp.Delivery{Body: []byte(validEnvelope), Headers: xdeath("orders", "expired", 1)},
			queue: "payments", class: quarantine.ClassExhausted, attempt: 4, reason: "card declined", failed: time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC), job: "charge"},
		{name: "broken envelope", d: amqp.Delivery{Body: []byte(`{"envelope":"quarantine.failure/v1","job":`)},
			class: quarantine.ClassMalformed, reason: "invalid JSON", flags: []string{quarantine.FlagMalformed}},
		{name: "broken envelope that was dead-lettered is a dead letter", d: amqp.Delivery{Body: []byte(`{"envelope":"quarantine.failure/v1","job":`), Headers: xdeath("orders", "rejected", 1)},
			queue: "orders", class: quarantine.ClassRejected, attempt: 1, reason: "rejected from queue orders", failed: deathTime},
		{name: "unknown envelope version", d: amqp.Delivery{Body: []byte(`{"envelope":"quarantine.failure/v9"}`)},
			class: quarantine.ClassMalformed, reason: "unknown envelope version", flags: []string{quarantine.FlagMalformed, quarantine.FlagUnknownEnvelope}},
		{name: "invalid UTF-8 header", d: amqp.Delivery{Body: []byte("x"), Headers: with(xdeath("orders", "rejected", 1), "x-bad\xff", "v\x00")},
			queue: "orders", class: quarantine.ClassRejected, attempt: 1, reason: "rejected", flags: []string{quarantine.FlagInvalidUTF8}, failed: deathTime},
		{name: "hostile queue name is quoted", d: amqp.Delivery{Body: []byte("x"), Headers: xdeath("a b\r\nc", "rejected", 1)},
			queue: "a b\r\nc", class: quarantine.ClassRejected, attempt: 1, reason: `rejected from queue "a b\r\nc" (x-death count 1)`, failed: deathTime},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := tc.d
			body := bytes.Clone(d.Body)
			firstWant := tc.failed
			if tc.d.Headers["x-death"] == nil || strings.Contains(tc.name, "envelope dead-lettered") {
				firstWant = time.Time{}
			}
			m := decoder{source: "rmq"}.decode(&d)
			if !bytes.Equal(d.Body, body) {
				t.Fatal("decode changed the body")
			}
			if m.Queue != tc.queue || m.FailureClass != tc.class || m.Attempts != tc.attempt || !strings.Contains(m.Reason, tc.reason) {
				t.Fatalf("got queue %q class %s attempts %d reason %q\nwant queue %q class %s attempts %d reason ~ %q",
					m.Queue, m.FailureClass, m.Attempts, m.Reason, tc.queue, tc.class, tc.attempt, tc.reason)
			}
			if !m.FailedAt.Equal(tc.failed) || m.JobName != tc.job {
				t.Fatalf("failed at %v job %q, want %v %q", m.FailedAt, m.JobName, tc.failed, tc.job)
			}
			if _, isArray := tc.d.Headers["x-death"].([]any); isArray && !firstWant.IsZero() &&
				(m.FirstFailedAt == nil || !m.FirstFailedAt.Equal(firstWant)) {
				t.Fatalf("first failed at %v, want the x-death time %v", m.FirstFailedAt, firstWant)
			}
			for _, f := range tc.flags {
				if !m.HasFlag(f) {
					t.Errorf("flag %s missing from %v", f, m.Flags)
				}
			}
			if len(tc.flags) == 0 && (m.HasFlag(quarantine.FlagMalformed) || m.HasFlag(quarantine.FlagInvalidUTF8)) {
				t.Errorf("unexpected flags %v", m.Flags)
			}
			checkMessage(t, &d, m)
		})
	}
}

func TestDecodeProperties(t *testing.T) {
	t.Parallel()
	ts := time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)
	d := amqp.Delivery{Body: []byte(`{"a":1}`), MessageId: "m-1", Timestamp: ts, Type: "charge",
		Headers: with(xdeath("orders", "rejected", 2), "x-idempotency-key", "k-1", "n", int32(7), "flag", true,
			"nested", amqp.Table{"b": []any{int64(1), "two"}}, "bin", []byte{0xff, 0x00}, "text-bytes", []byte("hello"), "nan", math.NaN())}
	m := decoder{source: "rmq", sourceQueue: "orders-v2"}.decode(&d)
	if m.MessageID != "m-1" || m.EnqueuedAt == nil || !m.EnqueuedAt.Equal(ts) || m.ContentType != "application/json" {
		t.Fatalf("properties: %+v", m)
	}
	if m.Queue != "orders-v2" {
		t.Fatalf("source_queue did not override: %q", m.Queue)
	}
	want := map[string]string{"x-idempotency-key": "k-1", "n": "7", "flag": "true", "nested": `{"b":[1,"two"]}`,
		"bin": `"/wA="`, "text-bytes": "hello", "nan": "NaN", "x-first-death-queue": "orders",
		"x-death": `[{"count":2,"exchange":"","queue":"orders","reason":"rejected","routing-keys":["orders"],"time":"2026-11-29T10:00:00Z"}]`}
	for k, v := range want {
		if m.Headers[k] != v {
			t.Errorf("header %s = %q, want %q", k, m.Headers[k], v)
		}
	}
	if m.DedupeKey != "mid:m-1/xdeath:2:"+strconv.FormatInt(deathTime.Unix(), 10) {
		t.Fatalf("dedupe key %q", m.DedupeKey)
	}
	d.ContentType = "text/plain"
	if m := (decoder{}).decode(&d); m.ContentType != "text/plain" {
		t.Fatalf("content type %q", m.ContentType)
	}
}

func TestDedupeKey(t *testing.T) {
	t.Parallel()
	base := amqp.Delivery{Body: []byte("body"), Headers: xdeath("orders", "rejected", 1)}
	key := func(d amqp.Delivery) string { return decoder{source: "rmq"}.decode(&d).DedupeKey }
	k0 := key(base)
	if !strings.HasPrefix(k0, "sha256:") || len(k0) != len("sha256:")+64 {
		t.Fatalf("content key %q", k0)
	}
	same := []struct {
		name string
		d    amqp.Delivery
	}{
		{"redelivered by a quorum queue", amqp.Delivery{Body: []byte("body"), Headers: with(base.Headers, "x-delivery-count", int64(3)), Redelivered: true, DeliveryTag: 9}},
		{"other properties", amqp.Delivery{Body: []byte("body"), Headers: base.Headers, ContentType: "text/plain", Exchange: "x"}},
	}
	for _, c := range same {
		if k := key(c.d); k != k0 {
			t.Errorf("%s: key %s, want %s", c.name, k, k0)
		}
	}
	differ := []struct {
		name string
		d    amqp.Delivery
	}{
		{"body", amqp.Delivery{Body: []byte("body2"), Headers: base.Headers}},
		{"header value", amqp.Delivery{Body: []byte("body"), Headers: with(base.Headers, "x-first-death-queue", "other")}},
		{"header added", amqp.Delivery{Body: []byte("body"), Headers: with(base.Headers, "h", "")}},
		{"dead-lettered again", amqp.Delivery{Body: []byte("body"), Headers: xdeath("orders", "rejected", 2)}},
		{"length framing", amqp.Delivery{Body: []byte("bod"), Headers: with(base.Headers, "y", "")}},
	}
	seen := map[string]string{k0: "base"}
	for _, c := range differ {
		k := key(c.d)
		if prev, dup := seen[k]; dup {
			t.Errorf("%s: same key as %s", c.name, prev)
		}
		seen[k] = c.name
	}
	// With a message_id: the id and the newest x-death count and time.
	withID := func(id string, h amqp.Table) string {
		return key(amqp.Delivery{Body: []byte("any"), MessageId: id, Headers: h})
	}
	if a, b := withID("m", base.Headers), withID("m", with(base.Headers, "x-delivery-count", int64(1), "extra", "1")); a != b {
		t.Errorf("message_id key changed with headers: %s %s", a, b)
	}
	if withID("m", nil) != "mid:m" || withID("m", base.Headers) == withID("m", xdeath("orders", "rejected", 2)) {
		t.Errorf("message_id keys: %s %s", withID("m", nil), withID("m", base.Headers))
	}
	if k := withID("bad\xff", nil); !strings.HasPrefix(k, "mid:sha256:") || k == withID("bad\xfe", nil) {
		t.Errorf("unclean message_id key %q", k)
	}
}

// checkMessage asserts what holds for every delivery: the payload is the
// body byte-exact (or the envelope's payload), the message normalises
// into clean text, and the dedupe key is stable.
func checkMessage(t *testing.T, d *amqp.Delivery, m *quarantine.Message) {
	t.Helper()
	if m.Source != "rmq" && m.Source != "" || m.SourceKind != quarantine.SourceRabbitMQ {
		t.Fatalf("source %q kind %q", m.Source, m.SourceKind)
	}
	if !isEnvelope(d.Body) && !(claimsEnvelope(d.Body) && !hasNativeHeaders(d.Headers)) && !bytes.Equal(m.Payload, d.Body) {
		t.Fatalf("payload is not the body")
	}
	if m.DedupeKey == "" || m.DedupeKey != (decoder{source: m.Source}).decode(d).DedupeKey {
		t.Fatal("dedupe key empty or unstable")
	}
	if !m.FailureClass.Valid() || m.Flags == nil {
		t.Fatalf("class %q flags %v", m.FailureClass, m.Flags)
	}
	m.Normalize(time.Now())
	if m.PayloadSHA256 != quarantine.PayloadHash(m.Payload) {
		t.Fatal("hash")
	}
	for _, s := range []string{m.Queue, m.Reason, m.MessageID, m.DedupeKey, m.JobName, m.ContentType} {
		if !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
			t.Fatalf("unclean text %q", s)
		}
	}
	for k, v := range m.Headers {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			t.Fatalf("unclean header %q: %q", k, v)
		}
	}
}

// The fast JSON path renders exactly what encoding/json renders.
func TestHeaderStringMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	values := []any{nil, true, int8(-3), int16(300), int32(-7), int64(1 << 40), 5, uint8(255), uint16(1), uint32(7), uint64(1 << 63),
		deathTime, time.Date(2026, 1, 2, 3, 4, 5, 600, time.FixedZone("x", 3600)),
		[]any{}, amqp.Table{}, xdeath("orders", "rejected", 3)["x-death"],
		amqp.Table{"b": amqp.Table{"z": []any{"a<b", "é", "q\"", int64(1)}}, "a": 1.5},
		[]any{"plain", "with space", "tab\t", "\x7f", "&"}, amqp.Decimal{Scale: 2, Value: 314},
		[]byte{0xff}, float32(1.25)}
	for _, v := range values {
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if got := headerString(v); got != string(want) {
			t.Errorf("%#v: %s, want %s", v, got, want)
		}
	}
}

// A message that went through a retry queue carries several x-death
// entries: first_failed_at is the earliest of their times.
func TestDecodeFirstFailedAtIsTheEarliestDeath(t *testing.T) {
	t.Parallel()
	early := deathTime.Add(-time.Hour)
	h := xdeath("orders", "rejected", 3)
	h["x-death"] = []any{
		amqp.Table{"queue": "orders", "reason": "rejected", "count": int64(3), "time": deathTime, "exchange": "", "routing-keys": []any{"orders"}},
		amqp.Table{"queue": "orders.retry", "reason": "expired", "count": int64(3), "time": early, "exchange": "", "routing-keys": []any{"orders.retry"}},
	}
	d := amqp.Delivery{Body: []byte("x"), Headers: h}
	m := decoder{source: "rmq"}.decode(&d)
	if !m.FailedAt.Equal(deathTime) || m.FirstFailedAt == nil || !m.FirstFailedAt.Equal(early) {
		t.Fatalf("failed at %v, first failed at %v; want %v and %v", m.FailedAt, m.FirstFailedAt, deathTime, early)
	}
}

package postgres

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/quarantine-dev/quarantine"
)

// TestEncodeHeadersIsJSONMarshal checks the reflection-free encoding of
// headers against json.Marshal, byte for byte, on the headers brokers
// give and on the ones it leaves to json.Marshal.
func TestEncodeHeadersIsJSONMarshal(t *testing.T) {
	t.Parallel()
	cases := []map[string]string{
		nil,
		{},
		{"x-bench": "1"},
		{
			"x-death":              `[{"count":1,"exchange":"","queue":"work","reason":"expired","routing-keys":["work"],"time":"2026-01-02T03:04:05Z"}]`,
			"x-first-death-queue":  "work",
			"x-first-death-reason": "expired",
			"x-idempotency-key":    "order:run:1",
			"":                     "",
		},
		{"back\\slash": `a\"b\\`, "quote\"": `"`},
		{"html": "<script>&amp;</script>"},
		{"ctl": "a\nb\tc\x00d\x1f"},
		{"del": "\x7f"},
		{"unicode": "überlauf \u2028 \u2029 日本"},
		{"invalid": "\xff\xfe"},
		{"b": "2", "a": "1", "B": "3", "aa": "4", "a-": "5"},
	}
	for _, h := range cases {
		want := "{}"
		if len(h) > 0 {
			b, err := json.Marshal(h)
			if err != nil {
				t.Fatal(err)
			}
			want = string(b)
		}
		if got := encodeHeaders(h); got != want {
			t.Errorf("encodeHeaders(%q) = %s, want %s", h, got, want)
		}
	}
}

// TestContainsNUL checks the test that sends a payload as bytes.
func TestContainsNUL(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		p    string
		want bool
	}{{"", false}, {"abc", false}, {"\x00", true}, {"ab\x00", true}, {"\x00ab", true}} {
		if got := containsNUL([]byte(c.p)); got != c.want {
			t.Errorf("containsNUL(%q) = %v, want %v", c.p, got, c.want)
		}
	}
}

// insertBatch returns n messages as a collector gives them to the store
// (1 KiB payloads, x-death headers; every third payload bytes that are
// not UTF-8, every fifth with enqueued and first-failed times),
// normalised.
func insertBatch(n int) []*quarantine.Message {
	failed := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	pad := strings.Repeat("x", 880)
	msgs := make([]*quarantine.Message, n)
	for i := range msgs {
		key := fmt.Sprintf("order:r:%d", i)
		m := &quarantine.Message{
			Source: "bench", SourceKind: quarantine.SourceRabbitMQ, Queue: "work",
			MessageID: fmt.Sprintf("r-%d", i), IdempotencyKey: key, KeyRule: "header:x-idempotency-key",
			DedupeKey:    fmt.Sprintf("mid:r-%d/xdeath:1:%d", i, failed.Unix()),
			FailureClass: quarantine.ClassExpired, Reason: "expired in queue work (RabbitMQ dead-lettered it, count 1)",
			Attempts: 1, FailedAt: failed.Add(time.Duration(i) * time.Microsecond), ContentType: "application/json",
			Payload: fmt.Appendf(nil, `{"order_id":%d,"note":%q}`, i, pad),
			Headers: map[string]string{
				"x-death":           `[{"count":1,"exchange":"","queue":"work","reason":"expired","routing-keys":["work"],"time":"2026-01-02T03:04:05Z"}]`,
				"x-idempotency-key": key,
			},
		}
		if i%3 == 0 {
			m.Payload = append(m.Payload, 0xff, 0)
		}
		if i%5 == 0 {
			m.EnqueuedAt, m.FirstFailedAt = &failed, &failed
		}
		m.Normalize(failed)
		msgs[i] = m
	}
	return msgs
}

// insertOIDs are the types of insertMessages' parameters.
var insertOIDs = []uint32{
	pgtype.TextArrayOID, pgtype.TextArrayOID, pgtype.TextArrayOID, pgtype.TextArrayOID, pgtype.TextArrayOID,
	pgtype.TextArrayOID, pgtype.TextArrayOID, pgtype.TextArrayOID, pgtype.Int4ArrayOID, pgtype.TextArrayOID,
	pgtype.TextArrayOID, pgtype.Int8ArrayOID, pgtype.TextArrayOID, pgtype.TextArrayOID, pgtype.Int4ArrayOID,
	pgtype.TextArrayOID, pgtype.TimestamptzArrayOID, pgtype.TimestamptzArrayOID, pgtype.TimestamptzArrayOID,
	pgtype.TimestamptzArrayOID, pgtype.TimestamptzArrayOID, pgtype.TextArrayOID, pgtype.TextArrayOID,
	pgtype.TextArrayOID, pgtype.Int4ArrayOID, pgtype.TextArrayOID, pgtype.TextArrayOID, pgtype.TextArrayOID,
	pgtype.ByteaArrayOID, pgtype.TextArrayOID, pgtype.TextArrayOID,
}

// encodeInsert encodes the arguments of insertMessages for msgs as pgx
// does (binary, one buffer, starting from the 256 bytes pgx starts each
// statement with), the first presized when presized is set.
func encodeInsert(tb testing.TB, m *pgtype.Map, msgs []*quarantine.Message, presizeFirst bool) []byte {
	idx := make([]int, len(msgs))
	for i := range idx {
		idx[i] = i
	}
	args, room := messageArrays(msgs, idx)
	if presizeFirst {
		args[0] = presized{v: args[0].([]string), room: room}
	}
	buf := make([]byte, 0, 256)
	for k, a := range args {
		var err error
		if buf, err = m.Encode(insertOIDs[k], pgtype.BinaryFormatCode, a, buf); err != nil {
			tb.Fatalf("argument %d: %v", k+1, err)
		}
	}
	return buf
}

// TestPresizedEncoding checks that a presized first argument leaves the
// encoding of insertMessages' arguments as it is, and that the room it
// makes holds them all (pgx's buffer never grows after it).
func TestPresizedEncoding(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 7, 500} {
		msgs := insertBatch(n)
		m := pgtype.NewMap()
		want := encodeInsert(t, m, msgs, false)
		presize(m)
		presize(m) // once is enough: a second call adds nothing
		if len(m.TryWrapEncodePlanFuncs) != len(pgtype.NewMap().TryWrapEncodePlanFuncs)+1 {
			t.Fatalf("presize twice added %d wrap functions, want 1", len(m.TryWrapEncodePlanFuncs)-len(pgtype.NewMap().TryWrapEncodePlanFuncs))
		}
		got := encodeInsert(t, m, msgs, true)
		if !bytes.Equal(got, want) {
			t.Fatalf("%d messages: the presized encoding differs from pgx's", n)
		}
		if _, est := messageArrays(msgs, []int{}); est <= 0 {
			t.Fatalf("the estimate of no messages is %d", est)
		}
		idx := make([]int, n)
		for i := range idx {
			idx[i] = i
		}
		if _, est := messageArrays(msgs, idx); est < len(got) {
			t.Errorf("%d messages: estimated %d bytes, encoded %d: pgx's buffer grows again", n, est, len(got))
		}
	}
}

// BenchmarkEncodeInsert measures the encoding of the arguments of one
// insertMessages of 500 messages (the collector's batch), as pgx does it,
// with and without the presized first argument.
func BenchmarkEncodeInsert(b *testing.B) {
	msgs := insertBatch(500)
	for _, presizeFirst := range []bool{false, true} {
		b.Run(fmt.Sprintf("presized=%v", presizeFirst), func(b *testing.B) {
			m := pgtype.NewMap()
			presize(m)
			b.ReportAllocs()
			for b.Loop() {
				encodeInsert(b, m, msgs, presizeFirst)
			}
		})
	}
}

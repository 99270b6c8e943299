package postgres

import (
	"encoding/json"
	"testing"
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

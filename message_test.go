package quarantine_test

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/quarantine-dev/quarantine"
)

func TestNormalize(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 10, 0, 0, 123456789, time.UTC)
	payload := []byte{0xff, 0x00, 'x'}
	m := &quarantine.Message{
		Queue:   "orders\xff",
		Reason:  strings.Repeat("é", quarantine.MaxReasonBytes), // 2 bytes each: over the cap
		Payload: payload,
		Headers: map[string]string{"a\x00": "b\xff"},
	}
	m.Normalize(now)
	if !quarantine.ValidID(m.ID) || m.Status != quarantine.StatusQuarantined || m.PayloadVersion != 1 {
		t.Fatalf("defaults: %+v", m)
	}
	if m.PayloadSHA256 != quarantine.PayloadHash(payload) || string(m.Payload) != string(payload) || m.PayloadSize != 3 {
		t.Fatal("payload must be kept byte-exact and hashed")
	}
	if !m.CollectedAt.Equal(now.Truncate(time.Microsecond)) || !m.FailedAt.Equal(m.CollectedAt) {
		t.Fatalf("times: %v %v", m.CollectedAt, m.FailedAt)
	}
	if len(m.Reason) > quarantine.MaxReasonBytes || !utf8.ValidString(m.Reason) || !m.HasFlag(quarantine.FlagReasonTruncated) {
		t.Fatalf("reason not cut cleanly: %d bytes, flags %v", len(m.Reason), m.Flags)
	}
	if !utf8.ValidString(m.Queue) || m.Headers["a\u2400"] != "b\uFFFD" {
		t.Fatalf("text not sanitised: %q %q", m.Queue, m.Headers)
	}
	if m.FailureClass != quarantine.ClassUnknown || !m.HasFlag(quarantine.FlagMissingIdempotencyKey) {
		t.Fatalf("class %q flags %v", m.FailureClass, m.Flags)
	}
	if m.Fingerprint == "" {
		t.Fatal("no fingerprint")
	}
}

func TestFingerprintGroupsVariants(t *testing.T) {
	t.Parallel()
	same := []string{
		`charge 4711 failed for card "tok_abc" id 3f2a9c1e-0b7d-4c1e-9a7b-1d2e3f4a5b6c`,
		`charge 12 failed for card "tok_zzz" id 0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d`,
	}
	a := quarantine.Fingerprint("charge", quarantine.ClassPermanent, same[0])
	b := quarantine.Fingerprint("charge", quarantine.ClassPermanent, same[1])
	if a != b {
		t.Fatalf("variants split: %s vs %s (%q, %q)", a, b, quarantine.NormalizeReason(same[0]), quarantine.NormalizeReason(same[1]))
	}
	if a == quarantine.Fingerprint("refund", quarantine.ClassPermanent, same[0]) ||
		a == quarantine.Fingerprint("charge", quarantine.ClassExhausted, same[0]) ||
		a == quarantine.Fingerprint("charge", quarantine.ClassPermanent, "timeout talking to bank") {
		t.Fatal("distinct failures share a fingerprint")
	}
	if got := quarantine.NormalizeReason("object deadbeef42cafe not found at 0x7ffd1234 in facade"); got != "object <hex> not found at <hex> in facade" {
		t.Fatalf("hex: %q", got)
	}
}

func TestAssignOwner(t *testing.T) {
	t.Parallel()
	rules := []quarantine.OwnerRule{
		{Team: "payments", Queues: []string{"payments.*", "billing"}},
		{Team: "catchall", Queues: []string{"*"}},
	}
	for q, want := range map[string]string{"payments.refunds": "payments", "billing": "payments", "billing2": "catchall", "": "catchall"} {
		if got := quarantine.AssignOwner(rules, q); got != want {
			t.Errorf("%q: %q, want %q", q, got, want)
		}
	}
	if quarantine.AssignOwner(nil, "x") != "" {
		t.Error("no rules, no owner")
	}
}

func TestNormalizeReason(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"":                             "",
		"  timeout \t after\n\n 30s  ": "timeout after <n>s",
		`user "bob" not found`:         "user <str> not found",
		`it's 'x' and ` + "`y`":        "it<str>x' and <str>",
		`unterminated "quote`:          `unterminated "quote`,
		"id 3F2A9C1E-0B7D-4C1E-9A7B-1D2E3F4A5B6C.": "id <uuid>.",
		"amount -12.50 EUR, +3 items":              "amount <n> EUR, <n> items",
		"retry-3 v2 tok_abc123":                    "retry-<n> v<n> tok_abc<n>",
		"sha 9f86d081884c7d659a2feaa0c55ad015 ok":  "sha <hex> ok",
		"0XDEADBEEF01 and facade and 123456":       "<hex> and facade and <n>",
		"naïve café 42":                            "naïve café <n>",
	}
	for in, want := range cases {
		if got := quarantine.NormalizeReason(in); got != want {
			t.Errorf("NormalizeReason(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzNormalizeReason(f *testing.F) {
	f.Add(`charge 4711 failed for "tok" id 3f2a9c1e-0b7d-4c1e-9a7b-1d2e3f4a5b6c at 0x7ffd1234`)
	f.Add("\xff\x00 - + 1.2.3 '")
	f.Fuzz(func(t *testing.T, s string) {
		a := quarantine.NormalizeReason(s)
		if quarantine.NormalizeReason(s) != a {
			t.Fatal("not deterministic")
		}
		if strings.HasPrefix(a, " ") || strings.HasSuffix(a, " ") || strings.Contains(a, "  ") {
			t.Fatalf("white space not collapsed: %q", a)
		}
	})
}

// Text is stored as sent, or flagged precisely: NUL (which PostgreSQL text
// cannot hold) is replaced and flagged nul_replaced, not invalid_utf8; a
// queue no broker could route is dropped and flagged, never rewritten.
func TestNormalizeFlagsChangedText(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("q", quarantine.MaxQueueBytes)
	cases := []struct {
		name  string
		m     quarantine.Message
		check func(m *quarantine.Message) bool
		flags []string // exactly these besides missing_idempotency_key
	}{
		{"NUL in reason", quarantine.Message{Queue: "q", Reason: "a\x00b"},
			func(m *quarantine.Message) bool { return m.Reason == "a\u2400b" }, []string{quarantine.FlagNULReplaced}},
		{"NUL in message id", quarantine.Message{Queue: "q", MessageID: "m\x00"},
			func(m *quarantine.Message) bool { return m.MessageID == "m\u2400" }, []string{quarantine.FlagNULReplaced}},
		{"NUL in job name", quarantine.Message{Queue: "q", JobName: "\x00"},
			func(m *quarantine.Message) bool { return m.JobName == "\u2400" }, []string{quarantine.FlagNULReplaced}},
		{"invalid UTF-8 in reason", quarantine.Message{Queue: "q", Reason: "a\xffb"},
			func(m *quarantine.Message) bool { return m.Reason == "a\uFFFDb" }, []string{quarantine.FlagInvalidUTF8}},
		{"both in job name", quarantine.Message{Queue: "q", JobName: "\x00\xff"},
			func(m *quarantine.Message) bool { return m.JobName == "\u2400\uFFFD" }, []string{quarantine.FlagInvalidUTF8, quarantine.FlagNULReplaced}},
		{"NUL in queue", quarantine.Message{Queue: "a\x00b"},
			func(m *quarantine.Message) bool { return m.Queue == "" }, []string{quarantine.FlagInvalidQueue}},
		{"control character in queue", quarantine.Message{Queue: "a\x07b"},
			func(m *quarantine.Message) bool { return m.Queue == "" }, []string{quarantine.FlagInvalidQueue}},
		{"invalid UTF-8 in queue", quarantine.Message{Queue: "a\xff"},
			func(m *quarantine.Message) bool { return m.Queue == "" }, []string{quarantine.FlagInvalidQueue}},
		{"queue too long", quarantine.Message{Queue: long + "q"},
			func(m *quarantine.Message) bool { return m.Queue == "" }, []string{quarantine.FlagInvalidQueue}},
		{"longest queue", quarantine.Message{Queue: long},
			func(m *quarantine.Message) bool { return m.Queue == long }, nil},
		{"unicode queue", quarantine.Message{Queue: "commandes.été ✓"},
			func(m *quarantine.Message) bool { return m.Queue == "commandes.été ✓" }, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := tc.m
			m.Normalize(time.Now())
			if !tc.check(&m) {
				t.Errorf("text after Normalize: %+v", m)
			}
			var flags []string
			for _, f := range m.Flags {
				if f != quarantine.FlagMissingIdempotencyKey {
					flags = append(flags, f)
				}
			}
			if strings.Join(flags, ",") != strings.Join(tc.flags, ",") {
				t.Errorf("flags %v, want %v", flags, tc.flags)
			}
		})
	}
}

func TestQueueNameProblem(t *testing.T) {
	t.Parallel()
	for q, bad := range map[string]bool{
		"": false, "orders": false, "a.b-c_d/e:f": false, "été": false, "with space": false,
		strings.Repeat("x", 255): false, strings.Repeat("x", 256): true,
		"a\x00": true, "a\n": true, "\x7f": true, "\u0085": true, "\xff": true,
	} {
		if got := quarantine.QueueNameProblem(q); (got != "") != bad {
			t.Errorf("QueueNameProblem(%q) = %q, want a problem: %t", q, got, bad)
		}
	}
}

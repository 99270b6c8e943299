package quarantine_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// chain builds n sealed events.
func chain(t *testing.T, n int) []quarantine.AuditEvent {
	t.Helper()
	head := quarantine.EmptyHead()
	base := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	var out []quarantine.AuditEvent
	for i := 0; i < n; i++ {
		e := quarantine.NewAuditEvent("token:ops", "message.edit", "01J000000000000000000000", map[string]any{"i": i, "z": "é<>&", "a": []int{1, 2}})
		if err := e.Seal(head, base.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
		head = quarantine.AuditHead{Seq: e.Seq, Hash: e.Hash}
		out = append(out, e)
	}
	return out
}

func TestVerifyChainIntact(t *testing.T) {
	t.Parallel()
	ev := chain(t, 5)
	last := ev[len(ev)-1]
	r := quarantine.VerifyChain(ev, quarantine.AuditHead{Seq: last.Seq, Hash: last.Hash})
	if !r.OK || r.Checked != 5 || r.Head.Seq != 5 || r.Head.Hash != last.Hash {
		t.Fatalf("intact chain: %+v", r)
	}
	if ev[0].PrevHash != quarantine.GenesisHash {
		t.Fatalf("first prev hash %q", ev[0].PrevHash)
	}
}

func TestVerifyChainTamper(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		tamper func([]quarantine.AuditEvent) []quarantine.AuditEvent
		end    bool // verify against the kept head (EndAt)
		bad    int64
	}{
		{"changed field", func(e []quarantine.AuditEvent) []quarantine.AuditEvent { e[2].Actor = "mallory"; return e }, false, 3},
		{"changed details", func(e []quarantine.AuditEvent) []quarantine.AuditEvent {
			e[3].Details = json.RawMessage(`{"i":99}`)
			return e
		}, false, 4},
		{"deleted middle row", func(e []quarantine.AuditEvent) []quarantine.AuditEvent { return append(e[:2], e[3:]...) }, false, 3},
		{"swapped rows", func(e []quarantine.AuditEvent) []quarantine.AuditEvent {
			e[1].Seq, e[2].Seq = e[2].Seq, e[1].Seq
			e[1], e[2] = e[2], e[1]
			return e
		}, false, 2},
		{"flipped bit in hash", func(e []quarantine.AuditEvent) []quarantine.AuditEvent {
			b := []byte(e[1].Hash)
			b[10] ^= 1
			e[1].Hash = string(b)
			return e
		}, false, 2},
		{"forged appended row, bad hash", func(e []quarantine.AuditEvent) []quarantine.AuditEvent {
			f := e[4]
			f.Seq, f.PrevHash, f.Actor = 6, e[4].Hash, "mallory"
			return append(e, f)
		}, false, 6},
		{"forged appended row, right hash", func(e []quarantine.AuditEvent) []quarantine.AuditEvent {
			f := quarantine.NewAuditEvent("mallory", "message.discard", "x", nil)
			_ = f.Seal(quarantine.AuditHead{Seq: 5, Hash: e[4].Hash}, time.Now())
			return append(e, f)
		}, true, 6},
		{"truncated tail", func(e []quarantine.AuditEvent) []quarantine.AuditEvent { return e[:3] }, true, 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ev := chain(t, 5)
			head := quarantine.AuditHead{Seq: ev[4].Seq, Hash: ev[4].Hash}
			ev = tc.tamper(ev)
			v := quarantine.NewChainVerifier()
			if tc.end {
				v.EndAt(head)
			}
			for i := range ev {
				if !v.Add(&ev[i]) {
					break
				}
			}
			r := v.Finish()
			if r.OK || r.FirstBadSeq != tc.bad || r.Problem == "" {
				t.Fatalf("want first bad %d, got %+v", tc.bad, r)
			}
		})
	}
}

func TestCanonicalJSONIsStable(t *testing.T) {
	t.Parallel()
	a := quarantine.AuditEvent{Seq: 1, Time: time.Unix(0, 1500).UTC(), Details: json.RawMessage(`{"b":1,"a":{"y":2,"x":"<"}}`)}
	b := a
	b.Details = json.RawMessage("{ \"a\" : {\"x\":\"<\", \"y\":2}, \"b\": 1 }")
	ca, _ := a.CanonicalJSON()
	cb, _ := b.CanonicalJSON()
	if string(ca) != string(cb) {
		t.Fatalf("canonical forms differ:\n%s\n%s", ca, cb)
	}
	if !strings.Contains(string(ca), `"details":{"a":{"x":"<","y":2},"b":1}`) || strings.Contains(string(ca), " ") {
		t.Fatalf("not canonical: %s", ca)
	}
}

// TestCanonicalJSONStrings: the strings of an event are written as
// encoding/json writes them (no HTML escaping), plain ASCII or not.
func TestCanonicalJSONStrings(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "token:ops", `say "hi"`, `back\slash`, "tab\there", "del\x7f", "é<>&", "line\u2028sep", "bad\xffutf8", "nul\x00"} {
		e := quarantine.AuditEvent{Seq: 7, Time: time.Unix(0, 1500).UTC(), Actor: s, Action: s, Subject: s, Details: json.RawMessage(`{"s":1}`)}
		got, err := e.CanonicalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		q := strings.TrimSuffix(b.String(), "\n")
		want := `{"action":` + q + `,"actor":` + q + `,"details":{"s":1},"seq":7,"subject":` + q + `,"time":"1970-01-01T00:00:00.000001Z"}`
		if string(got) != want {
			t.Errorf("%q:\n got %s\nwant %s", s, got, want)
		}
	}
}

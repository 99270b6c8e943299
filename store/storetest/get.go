package storetest

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/quarantine-dev/quarantine"
)

func testGetMessage(t *testing.T, h Harness) {
	t.Run("PayloadBytesExact", func(t *testing.T) {
		t.Parallel()
		s := h.Open(t)
		all256 := make([]byte, 256)
		for i := range all256 {
			all256[i] = byte(i)
		}
		big := make([]byte, 5<<20)
		rng := rand.New(rand.NewPCG(1, 2))
		for i := range big {
			big[i] = byte(rng.Uint32())
		}
		bigText := bytes.Repeat([]byte("héllo wörld, 日本 "), (1<<20)/20)
		cases := []struct {
			name    string
			payload []byte
		}{
			{"binary", all256},
			{"empty", []byte{}},
			{"nil", nil},
			{"nul inside text", []byte("abc\x00def")},
			{"invalid utf-8", []byte("abc\xc3\x28def")},
			{"utf-8 text", []byte("grüße 🚀 \u2028 'quoted' \\ %_")},
			{"5 MiB binary", big},
			{"1 MiB text", bigText},
		}
		for _, c := range cases {
			m := newMsg(withPayload(c.payload))
			insert(t, s, m)
			got, err := s.GetMessage(t.Context(), m.ID)
			wantOK(t, err, "GetMessage "+c.name)
			if !bytes.Equal(got.Payload, c.payload) {
				t.Fatalf("%s: payload of %d bytes came back as %d bytes (or different bytes)", c.name, len(c.payload), len(got.Payload))
			}
			if got.PayloadSize != len(c.payload) || got.PayloadSHA256 != quarantine.PayloadHash(c.payload) {
				t.Fatalf("%s: size %d hash %s, want %d %s", c.name, got.PayloadSize, got.PayloadSHA256, len(c.payload), quarantine.PayloadHash(c.payload))
			}
			wantSame(t, m, got, true)
			v, err := s.PayloadVersion(t.Context(), m.ID, 1)
			wantOK(t, err, "PayloadVersion "+c.name)
			if !bytes.Equal(v.Payload, c.payload) || v.SHA256 != quarantine.PayloadHash(c.payload) || v.Size != len(c.payload) {
				t.Fatalf("%s: version 1 holds %d bytes, hash %s", c.name, len(v.Payload), v.SHA256)
			}
		}
	})

	t.Run("NotFound", func(t *testing.T) {
		t.Parallel()
		s := h.Open(t)
		insert(t, s, newMsg())
		for _, id := range []string{quarantine.NewID(baseTime), "", "not-an-id", "' OR '1'='1", "01ARZ3NDEKTSV4RRFFQ69G5FAV\x00"} {
			_, err := s.GetMessage(t.Context(), id)
			wantCode(t, err, quarantine.ENOTFOUND)
		}
	})
}

func testPayloadVersions(t *testing.T, h Harness) {
	s := h.Open(t)
	m := newMsg()
	insert(t, s, m)
	unknown := quarantine.NewID(baseTime)

	_, err := s.PayloadVersions(t.Context(), unknown)
	wantCode(t, err, quarantine.ENOTFOUND)
	_, err = s.PayloadVersions(t.Context(), "x' OR 1=1 --")
	wantCode(t, err, quarantine.ENOTFOUND)
	_, err = s.PayloadVersion(t.Context(), unknown, 1)
	wantCode(t, err, quarantine.ENOTFOUND)
	for _, v := range []int{0, 2, -1} {
		_, err = s.PayloadVersion(t.Context(), m.ID, v)
		wantCode(t, err, quarantine.ENOTFOUND)
	}
	vs, err := s.PayloadVersions(t.Context(), m.ID)
	wantOK(t, err, "PayloadVersions")
	if len(vs) != 1 || vs[0].Version != 1 || vs[0].Payload != nil {
		t.Fatalf("PayloadVersions = %+v, want only version 1 without bytes", vs)
	}
	v, err := s.PayloadVersion(t.Context(), m.ID, 1)
	wantOK(t, err, "PayloadVersion")
	if v.MessageID != m.ID || !bytes.Equal(v.Payload, m.Payload) || v.SHA256 != m.PayloadSHA256 || v.PrevSHA256 != "" {
		t.Fatalf("PayloadVersion(1) = %+v, want the collected payload", v)
	}
	if !v.CreatedAt.Equal(vs[0].CreatedAt) || v.Size != vs[0].Size || v.ContentType != vs[0].ContentType {
		t.Fatalf("PayloadVersion(1) %+v disagrees with PayloadVersions %+v", v, vs[0])
	}
}

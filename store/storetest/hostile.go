package storetest

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/quarantine-dev/quarantine"
)

// longText is 10,000 characters that do not compress to nothing.
func longText() string {
	rng := rand.New(rand.NewPCG(7, 7))
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 '%_\\-;"
	b := make([]byte, 10000)
	for i := range b {
		b[i] = alphabet[rng.IntN(len(alphabet))]
	}
	return string(b)
}

var hostileStrings = []string{
	"'; DROP TABLE messages; --",
	`" OR 1=1 --`,
	`%_\%\_[]^$.*`,
	"nul\x00byte",
	"bad\xff\xfeutf8\xc3\x28",
	"\x00",
	"<script>alert('x')</script>",
	"日本語 \u202e rtl \U0001F680 \u2028",
	"back\\slash\\\\ and \"quotes\" and 'apostrophes'",
	"$1 $$ :name ?",
}

func testHostile(t *testing.T, h Harness) {
	t.Run("MessageFields", func(t *testing.T) {
		t.Parallel()
		s := h.Open(t)
		for i, v := range hostileStrings {
			m := hostileMsg(v, i)
			res, err := s.InsertBatch(t.Context(), []*quarantine.Message{m})
			wantOK(t, err, fmt.Sprintf("InsertBatch hostile %q", v))
			if !res[0].New {
				t.Fatalf("hostile %q: not stored as new", v)
			}
			for _, f := range []string{m.Source, m.Queue, m.JobName, m.Reason, m.Owner, m.DedupeKey, m.IdempotencyKey} {
				if !utf8.ValidString(f) || strings.ContainsRune(f, 0) {
					t.Fatalf("hostile %q: normalised field %q still invalid", v, f)
				}
			}
			got, err := s.GetMessage(t.Context(), m.ID)
			wantOK(t, err, "GetMessage")
			wantSame(t, m, got, true)
			// Filtering by the stored (sanitised) values finds exactly it.
			f := quarantine.Filter{Queue: []string{m.Queue}, Owner: []string{m.Owner}, Source: []string{m.Source},
				JobName: []string{m.JobName}, IdempotencyKey: []string{m.IdempotencyKey}, Text: m.Queue}
			list := listAll(t, s, f)
			if len(list) != 1 || list[0].ID != m.ID {
				t.Fatalf("hostile %q: filter by its own values lists %v, want %s", v, ids(list), m.ID)
			}
			// Filtering by the raw values is refused or answered, never a crash.
			raw := quarantine.Filter{Queue: []string{v}, Owner: []string{v}, Text: v}
			_, err = s.ListMessages(t.Context(), raw)
			if err != nil {
				wantCode(t, err, quarantine.EINVALID)
			}
			_, err = s.CountByQueue(t.Context(), raw)
			if err != nil {
				wantCode(t, err, quarantine.EINVALID)
			}
			for _, id := range []string{v, m.ID + v} {
				_, err = s.GetMessage(t.Context(), id)
				if c := quarantine.ErrorCode(err); c != quarantine.ENOTFOUND && c != quarantine.EINVALID {
					t.Fatalf("GetMessage(%q) = %v, want ENOTFOUND or EINVALID", id, err)
				}
				_, err = s.PayloadVersions(t.Context(), id)
				if c := quarantine.ErrorCode(err); c != quarantine.ENOTFOUND && c != quarantine.EINVALID {
					t.Fatalf("PayloadVersions(%q) = %v, want ENOTFOUND or EINVALID", id, err)
				}
				_, err = s.TokenBySecretHash(t.Context(), id)
				if c := quarantine.ErrorCode(err); c != quarantine.ENOTFOUND && c != quarantine.EINVALID {
					t.Fatalf("TokenBySecretHash(%q) = %v, want ENOTFOUND or EINVALID", id, err)
				}
			}
		}
		all := listAll(t, s, quarantine.Filter{})
		if len(all) != len(hostileStrings) {
			t.Fatalf("%d messages stored, want %d: hostile input must not touch other rows", len(all), len(hostileStrings))
		}
	})

	t.Run("LongValues", func(t *testing.T) {
		t.Parallel()
		s := h.Open(t)
		long := longText()
		// A long reason is cut to MaxReasonBytes and flagged; long header
		// values are kept: both must be stored.
		m := newMsg(withReason(long))
		m.Headers["x-long"] = long
		m.Headers[long[:300]] = "long key"
		insert(t, s, m)
		if len(m.Reason) != quarantine.MaxReasonBytes || !m.HasFlag(quarantine.FlagReasonTruncated) {
			t.Fatalf("reason of %d bytes, flags %v", len(m.Reason), m.Flags)
		}
		got, err := s.GetMessage(t.Context(), m.ID)
		wantOK(t, err, "GetMessage")
		wantSame(t, m, got, true)
		// Every other text field long: stored exactly, or refused as invalid.
		all := hostileMsg(long, 99)
		_, err = s.InsertBatch(t.Context(), []*quarantine.Message{all})
		notInternal(t, err, "InsertBatch with 10k-character fields")
		if err == nil {
			got, err := s.GetMessage(t.Context(), all.ID)
			wantOK(t, err, "GetMessage")
			wantSame(t, all, got, true)
		} else {
			wantCode(t, err, quarantine.EINVALID)
		}
		for _, f := range []quarantine.Filter{{Text: long}, {Queue: []string{long}}, {Text: long[:quarantine.MaxFilterValue]}} {
			_, err := s.ListMessages(t.Context(), f)
			notInternal(t, err, "ListMessages with a long value")
		}
	})

	t.Run("AuditAndTokens", func(t *testing.T) {
		t.Parallel()
		s := h.Open(t)
		for _, v := range hostileStrings {
			e, err := s.AppendAudit(t.Context(), quarantine.NewAuditEvent(v, v, v, map[string]string{"v": v}))
			wantOK(t, err, fmt.Sprintf("AppendAudit %q", v))
			if e.Actor != quarantine.SanitizeText(v) || e.Subject != quarantine.SanitizeText(v) {
				t.Fatalf("hostile actor %q sealed as %q", v, e.Actor)
			}
			got, err := s.ListAudit(t.Context(), quarantine.AuditFilter{Actor: e.Actor, Subject: e.Subject, Action: e.Action})
			wantOK(t, err, "ListAudit")
			if len(got) != 1 || got[0].Seq != e.Seq {
				t.Fatalf("hostile actor %q: ListAudit finds %d events", v, len(got))
			}
			_, err = s.ListAudit(t.Context(), quarantine.AuditFilter{Actor: v})
			if err != nil {
				wantCode(t, err, quarantine.EINVALID)
			}
			tok, _ := newToken(v, quarantine.RoleViewer, v)
			err = s.CreateToken(t.Context(), tok, v)
			if err != nil {
				wantCode(t, err, quarantine.EINVALID)
			}
			err = s.RevokeToken(t.Context(), v, v)
			if c := quarantine.ErrorCode(err); c != quarantine.ENOTFOUND && c != quarantine.EINVALID {
				t.Fatalf("RevokeToken(%q) = %v", v, err)
			}
		}
		long := longText()
		_, err := s.AppendAudit(t.Context(), quarantine.NewAuditEvent("alice", "x", long, map[string]string{"long": long}))
		notInternal(t, err, "AppendAudit with a 10k subject")
		v, err := s.VerifyAudit(t.Context())
		wantOK(t, err, "VerifyAudit")
		if !v.OK {
			t.Fatalf("chain with hostile events: %+v", v)
		}
	})
}

// hostileMsg puts v into every text field of a message.
func hostileMsg(v string, i int) *quarantine.Message {
	m := newMsg(withSource(v), withQueue(v), withOwner(v), withReason(v), withIdem(v), withDedupe(fmt.Sprintf("%s-%d", v, i)))
	m.JobName, m.MessageID, m.SchemaVersion, m.ContentType = v, v, v, v
	m.Headers = map[string]string{v: v, "x-" + v: "plain"}
	m.Payload = []byte(v)
	return m
}

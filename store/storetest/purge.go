package storetest

import (
	"bytes"
	"cmp"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
)

func testPurgePayloads(t *testing.T, h Harness) {
	s := h.Open(t)
	ctx := t.Context()
	var msgs []*quarantine.Message
	for i := range 12 {
		m := newMsg()
		m.CollectedAt = baseTime.Add(time.Duration(i%6) * time.Hour) // updated_at starts as collected_at
		msgs = append(msgs, m)
	}
	insert(t, s, msgs...)
	edited := msgs[0]
	_, err := s.EditPayload(ctx, edit(edited, edited.PayloadSHA256, []byte("second version")))
	wantOK(t, err, "EditPayload")
	var replayed, discarded []*quarantine.Message
	for i, m := range msgs {
		switch {
		case i == 0:
			// the edit moved updated_at to now: never old enough below
		case i%3 == 0:
			discarded = append(discarded, m)
		case i%3 == 1:
			replayed = append(replayed, m)
		}
	}
	setStatus(t, h, s, quarantine.StatusReplayed, replayed...)
	setStatus(t, h, s, quarantine.StatusDiscarded, append(discarded, edited)...)
	before := baseTime.Add(4*time.Hour + time.Minute).Truncate(time.Microsecond)
	var want []*quarantine.Message
	for _, m := range replayed {
		if m.CollectedAt.Before(before) {
			want = append(want, m)
		}
	}
	slices.SortFunc(want, func(a, b *quarantine.Message) int {
		return cmp.Or(a.CollectedAt.Compare(b.CollectedAt), cmp.Compare(a.ID, b.ID))
	})
	if len(want) < 3 {
		t.Fatalf("dataset: only %d messages to purge", len(want))
	}
	// Two rounds under the limit take the oldest first, then the rest.
	first, err := s.PurgePayloads(ctx, quarantine.StatusReplayed, before, 2, "retention")
	wantOK(t, err, "PurgePayloads")
	second, err := s.PurgePayloads(ctx, quarantine.StatusReplayed, before, 100, "retention")
	wantOK(t, err, "PurgePayloads")
	third, err := s.PurgePayloads(ctx, quarantine.StatusReplayed, before, 100, "retention")
	wantOK(t, err, "PurgePayloads")
	if !slices.Equal(first.Purged, ids(want[:2])) || !slices.Equal(second.Purged, ids(want[2:])) || len(third.Purged) != 0 {
		t.Fatalf("purged %v then %v then %v, want %v then %v then none", first.Purged, second.Purged, third.Purged, ids(want[:2]), ids(want[2:]))
	}
	purged := map[string]bool{}
	for _, m := range want {
		purged[m.ID] = true
	}
	for _, m := range msgs {
		got, err := s.GetMessage(ctx, m.ID)
		wantOK(t, err, "GetMessage")
		if got.PayloadSHA256 != m.PayloadSHA256 && m != edited || got.PayloadSize != len(m.Payload) && m != edited {
			t.Fatalf("message %s lost its hash or size", m.ID)
		}
		if purged[m.ID] != got.HasFlag(quarantine.FlagPayloadPurged) || purged[m.ID] != (len(got.Payload) == 0) {
			t.Fatalf("message %s: purged %v, flags %v, %d payload bytes", m.ID, purged[m.ID], got.Flags, len(got.Payload))
		}
		if !purged[m.ID] && !bytes.Equal(got.Payload, m.Payload) && m != edited {
			t.Fatalf("message %s kept the wrong payload", m.ID)
		}
		v, err := s.PayloadVersion(ctx, m.ID, 1)
		wantOK(t, err, "PayloadVersion")
		if purged[m.ID] && (len(v.Payload) != 0 || v.SHA256 != m.PayloadSHA256 || v.Size != len(m.Payload)) {
			t.Fatalf("version 1 of purged %s: %d bytes, hash %s size %d", m.ID, len(v.Payload), v.SHA256, v.Size)
		}
	}
	// Every version goes: purge the edited (discarded) message too.
	res, err := s.PurgePayloads(ctx, quarantine.StatusDiscarded, time.Now().Add(time.Hour), 100, "retention")
	wantOK(t, err, "PurgePayloads")
	if !slices.Contains(res.Purged, edited.ID) || len(res.Purged) != len(discarded)+1 {
		t.Fatalf("discarded purge: %v", res.Purged)
	}
	for v := 1; v <= 2; v++ {
		pv, err := s.PayloadVersion(ctx, edited.ID, v)
		wantOK(t, err, "PayloadVersion")
		if len(pv.Payload) != 0 || pv.SHA256 == "" {
			t.Fatalf("version %d of the edited message after the purge: %d bytes, hash %q", v, len(pv.Payload), pv.SHA256)
		}
	}
	evs, err := s.ListAudit(ctx, quarantine.AuditFilter{Action: quarantine.ActionPurge})
	wantOK(t, err, "ListAudit")
	if len(evs) != 3 {
		t.Fatalf("%d purge events, want 3 (nothing purged, nothing appended)", len(evs))
	}
	var d struct {
		IDs []string `json:"ids"`
	}
	if err := json.Unmarshal(evs[0].Details, &d); err != nil || !slices.Equal(d.IDs, first.Purged) || evs[0].Actor != "retention" {
		t.Fatalf("first purge event %s %s (%v)", evs[0].Actor, evs[0].Details, err)
	}
	v, err := s.VerifyAudit(ctx)
	if err != nil || !v.OK {
		t.Fatalf("VerifyAudit = %+v, %v", v, err)
	}
	for _, c := range []struct {
		st    quarantine.Status
		limit int
	}{{"bogus", 10}, {quarantine.StatusReplayed, 0}, {quarantine.StatusReplayed, quarantine.MaxBulk + 1}} {
		_, err := s.PurgePayloads(ctx, c.st, before, c.limit, "retention")
		wantCode(t, err, quarantine.EINVALID)
	}
}

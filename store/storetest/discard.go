package storetest

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store"
)

func testDiscard(t *testing.T, h Harness) {
	runParallel(t, h, []subtest{
		{"ByIDs", testDiscardIDs},
		{"ByFilter", testDiscardFilter},
		{"MaxBulk", testDiscardMaxBulk},
		{"Operation", testDiscardOperation},
	})
}

// wantStatuses fails t unless every message is stored with its in-memory
// status.
func wantStatuses(t *testing.T, s store.Store, msgs []*quarantine.Message) {
	t.Helper()
	for _, m := range msgs {
		got, err := s.GetMessage(t.Context(), m.ID)
		wantOK(t, err, "GetMessage")
		if got.Status != m.Status {
			t.Fatalf("message %s is %s, want %s", m.ID, got.Status, m.Status)
		}
	}
}

// wantDiscardEvents fails t unless the audit log holds exactly one
// message.discard event per id, with reason and previous status, and
// the chain verifies.
func wantDiscardEvents(t *testing.T, s store.Store, reason string, prev map[string]quarantine.Status) {
	t.Helper()
	evs, err := s.ListAudit(t.Context(), quarantine.AuditFilter{Action: quarantine.ActionDiscard, Limit: quarantine.MaxLimit})
	wantOK(t, err, "ListAudit")
	if len(evs) != len(prev) {
		t.Fatalf("%d discard events, want %d", len(evs), len(prev))
	}
	for _, ev := range evs {
		var d struct {
			Reason         string            `json:"reason"`
			PreviousStatus quarantine.Status `json:"previous_status"`
		}
		if err := json.Unmarshal(ev.Details, &d); err != nil {
			t.Fatal(err)
		}
		want, ok := prev[ev.Subject]
		if !ok || d.Reason != reason || d.PreviousStatus != want || ev.Actor != "bob" {
			t.Fatalf("discard event %s %s %s, want subject among %v with previous status %s", ev.Subject, ev.Actor, ev.Details, prev, want)
		}
		delete(prev, ev.Subject)
	}
	v, err := s.VerifyAudit(t.Context())
	if err != nil || !v.OK {
		t.Fatalf("VerifyAudit = %+v, %v", v, err)
	}
}

func testDiscardIDs(t *testing.T, h Harness) {
	s := h.Open(t)
	ctx := t.Context()
	var msgs []*quarantine.Message
	for range 6 {
		msgs = append(msgs, newMsg())
	}
	insert(t, s, msgs...)
	setStatus(t, h, s, quarantine.StatusReplaying, msgs[1])
	setStatus(t, h, s, quarantine.StatusDiscarded, msgs[2])
	setStatus(t, h, s, quarantine.StatusReplayed, msgs[3])
	setStatus(t, h, s, quarantine.StatusRefailed, msgs[4])
	unknown := quarantine.NewID(baseTime)
	ids := []string{msgs[0].ID, msgs[1].ID, msgs[2].ID, unknown, msgs[3].ID, msgs[0].ID, msgs[4].ID, "not an id"}

	// A stale preview changes nothing.
	five := 4
	_, err := s.Discard(ctx, quarantine.Discard{IDs: ids, Reason: "junk", Actor: "bob", ExpectCount: &five})
	wantCode(t, err, quarantine.ECONFLICT)
	wantStatuses(t, s, msgs)

	res, err := s.Discard(ctx, quarantine.Discard{IDs: ids, Reason: "junk", Actor: "bob"})
	wantOK(t, err, "Discard")
	wantChanged := []string{msgs[0].ID, msgs[3].ID, msgs[4].ID}
	if res.Matched != 5 || !slices.Equal(res.Changed, wantChanged) {
		t.Fatalf("Discard = matched %d changed %v, want 5 and %v", res.Matched, res.Changed, wantChanged)
	}
	skipped := map[string]string{}
	for _, sk := range res.Skipped {
		skipped[sk.ID] = sk.Reason
	}
	if len(res.Skipped) != 4 || skipped[unknown] != "not found" || skipped["not an id"] != "not found" ||
		skipped[msgs[1].ID] == "" || skipped[msgs[2].ID] == "" {
		t.Fatalf("Skipped = %+v", res.Skipped)
	}
	prev := map[string]quarantine.Status{msgs[0].ID: quarantine.StatusQuarantined, msgs[3].ID: quarantine.StatusReplayed, msgs[4].ID: quarantine.StatusRefailed}
	for _, m := range msgs {
		if _, ok := prev[m.ID]; ok {
			m.Status = quarantine.StatusDiscarded
		}
	}
	wantStatuses(t, s, msgs)
	wantDiscardEvents(t, s, "junk", prev)
	for _, c := range []quarantine.Discard{
		{IDs: ids, Reason: "", Actor: "bob"},
		{Reason: "no selection", Actor: "bob"},
	} {
		if _, err := s.Discard(ctx, c); quarantine.ErrorCode(err) != quarantine.EUNPROCESSABLE && quarantine.ErrorCode(err) != quarantine.EINVALID {
			t.Fatalf("Discard(%+v) = %v, want a 4xx error", c, err)
		}
	}
}

// discardDataset opens a store with the list dataset and returns it, the
// messages, the filter the discard tests use and the ids it matches.
func discardDataset(t *testing.T, h Harness) (store.Store, []*quarantine.Message, quarantine.Filter, []string) {
	t.Helper()
	s := h.Open(t)
	msgs := listDataset(t, h, s)
	f := quarantine.Filter{Queue: []string{"orders", "billing"}, Status: []quarantine.Status{quarantine.StatusQuarantined, quarantine.StatusReplayed, quarantine.StatusDiscarded}}
	return s, msgs, f, expected(f, msgs)
}

func testDiscardFilter(t *testing.T, h Harness) {
	s, msgs, f, want := discardDataset(t, h)
	ctx := t.Context()
	n := len(want) + 1
	_, err := s.Discard(ctx, quarantine.Discard{Filter: &f, Reason: "bulk", Actor: "bob", ExpectCount: &n})
	wantCode(t, err, quarantine.ECONFLICT)
	wantStatuses(t, s, msgs)

	n--
	res, err := s.Discard(ctx, quarantine.Discard{Filter: &f, Reason: "bulk", Actor: "bob", ExpectCount: &n})
	wantOK(t, err, "Discard")
	if res.Matched != len(want) || len(res.Changed)+len(res.Skipped) != len(want) {
		t.Fatalf("matched %d changed %d skipped %d, want %d in all", res.Matched, len(res.Changed), len(res.Skipped), len(want))
	}
	prev, wantChanged, skipped := expectDiscard(msgs, want)
	for _, id := range skipped {
		if !slices.ContainsFunc(res.Skipped, func(s quarantine.BulkSkipped) bool { return s.ID == id && s.Reason != "" }) {
			t.Fatalf("discarded message %s not reported skipped: %+v", id, res.Skipped)
		}
	}
	slices.Sort(wantChanged)
	got := slices.Sorted(slices.Values(res.Changed))
	if !slices.Equal(got, wantChanged) {
		t.Fatalf("changed %v, want %v", got, wantChanged)
	}
	wantStatuses(t, s, msgs)
	wantDiscardEvents(t, s, "bulk", prev)
	// Counting reflects the change.
	counts, err := s.CountByQueue(ctx, quarantine.Filter{})
	wantOK(t, err, "CountByQueue")
	if wantCounts := expectedCounts(quarantine.Filter{}, msgs); !slices.Equal(counts, wantCounts) {
		t.Fatalf("CountByQueue after the discard = %v, want %v", counts, wantCounts)
	}
}

// expectDiscard is what discarding the messages of msgs that want names
// does: those already discarded are skipped (skipped, in msgs order); the
// others are changed (changed, in msgs order), prev has their statuses
// before, and msgs has them discarded (what is stored afterwards).
func expectDiscard(msgs []*quarantine.Message, want []string) (prev map[string]quarantine.Status, changed, skipped []string) {
	prev = map[string]quarantine.Status{}
	for _, m := range msgs {
		if !slices.Contains(want, m.ID) {
			continue
		}
		if m.Status == quarantine.StatusDiscarded {
			skipped = append(skipped, m.ID)
			continue
		}
		prev[m.ID] = m.Status
		changed = append(changed, m.ID)
		m.Status = quarantine.StatusDiscarded
	}
	return prev, changed, skipped
}

func testDiscardMaxBulk(t *testing.T, h Harness) {
	if raceEnabled {
		t.Skip("10,001 messages take minutes under the race detector; run without -race")
	}
	s := h.Open(t)
	ctx := t.Context()
	insertBulk(t, s, quarantine.MaxBulk+1)
	f := quarantine.Filter{Queue: []string{"bulk"}}
	_, err := s.Discard(ctx, quarantine.Discard{Filter: &f, Reason: "too many", Actor: "bob"})
	wantCode(t, err, quarantine.EUNPROCESSABLE)
	if msg := quarantine.ErrorMessage(err); !contains(msg, "10001") {
		t.Fatalf("the error does not name the count: %q", msg)
	}
	counts, err := s.CountByQueue(ctx, quarantine.Filter{Status: []quarantine.Status{quarantine.StatusDiscarded}})
	wantOK(t, err, "CountByQueue")
	if len(counts) != 0 {
		t.Fatalf("a refused bulk discard changed %v", counts)
	}
	// Exactly MaxBulk is allowed.
	p, err := s.ListMessages(ctx, quarantine.Filter{Queue: []string{"bulk"}, Limit: 1})
	wantOK(t, err, "ListMessages")
	f.FailedBefore = p.Messages[0].FailedAt // all but the newest
	res, err := s.Discard(ctx, quarantine.Discard{Filter: &f, Reason: "at the cap", Actor: "bob"})
	wantOK(t, err, "Discard at the cap")
	if res.Matched != quarantine.MaxBulk || len(res.Changed) != quarantine.MaxBulk {
		t.Fatalf("matched %d changed %d, want %d", res.Matched, len(res.Changed), quarantine.MaxBulk)
	}
	v, err := s.VerifyAudit(ctx)
	if err != nil || !v.OK || v.Checked != quarantine.MaxBulk {
		t.Fatalf("VerifyAudit = %+v, %v; want %d events", v, err, quarantine.MaxBulk)
	}
}

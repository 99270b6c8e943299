package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store"
)

func testRefailLink(t *testing.T, h Harness) {
	s := h.Open(t)
	ctx := t.Context()
	older := newMsg(withIdem("k-1"), withFailedAt(baseTime))
	newer := newMsg(withIdem("k-1"), withFailedAt(baseTime.Add(time.Hour)))
	quarantined := newMsg(withIdem("k-2"))
	noKey := newMsg(withIdem(""))
	other := newMsg(withIdem("k-3"))
	insert(t, s, older, newer, quarantined, noKey, other)
	setStatus(t, h, s, quarantine.StatusReplayed, older, newer, noKey, other)

	// The same key twice in one batch, a key only a quarantined message
	// has, an empty key, a redelivery of a stored message.
	again1 := newMsg(withIdem("k-1"))
	again2 := newMsg(withIdem("k-1"))
	q2 := newMsg(withIdem("k-2"))
	empty := newMsg(withIdem(""))
	redelivered := newMsg(withIdem("k-3"), withDedupe(other.DedupeKey))
	res, err := s.InsertBatch(ctx, []*quarantine.Message{redelivered, again1, again2, q2, empty})
	wantOK(t, err, "InsertBatch")
	if res[0].New || res[0].ID != other.ID {
		t.Fatalf("redelivery: %+v, want the stored message", res[0])
	}
	if again1.RefailOf != newer.ID {
		t.Fatalf("the first new message of the key has RefailOf %q, want the most recently failed replayed one %s", again1.RefailOf, newer.ID)
	}
	// The batch links as if stored one message at a time: the second new
	// message of the key re-failed from the next replayed one.
	if again2.RefailOf != older.ID {
		t.Fatalf("the second new message of the key has RefailOf %q, want %s", again2.RefailOf, older.ID)
	}
	newer.Status, older.Status = quarantine.StatusRefailed, quarantine.StatusRefailed
	for _, c := range []struct {
		m      *quarantine.Message
		refail string
		status quarantine.Status
	}{
		{again1, newer.ID, quarantine.StatusQuarantined},
		{again2, older.ID, quarantine.StatusQuarantined},
		{q2, "", quarantine.StatusQuarantined},
		{empty, "", quarantine.StatusQuarantined},
		{newer, "", quarantine.StatusRefailed},
		{older, "", quarantine.StatusRefailed},
		{other, "", quarantine.StatusReplayed},
		{noKey, "", quarantine.StatusReplayed},
		{quarantined, "", quarantine.StatusQuarantined},
	} {
		got, err := s.GetMessage(ctx, c.m.ID)
		wantOK(t, err, "GetMessage")
		if got.RefailOf != c.refail || got.Status != c.status {
			t.Errorf("message %s: refail_of %q status %s, want %q %s", c.m.ID, got.RefailOf, got.Status, c.refail, c.status)
		}
	}
	if newer.UpdatedAt.Equal(mustGet(t, s, newer.ID).UpdatedAt) {
		t.Error("marking refailed did not move updated_at")
	}
	// A later failure finds no replayed message of the key left.
	third := newMsg(withIdem("k-1"))
	insert(t, s, third)
	if third.RefailOf != "" || mustGet(t, s, third.ID).RefailOf != "" {
		t.Fatalf("third failure: RefailOf %q, want none", third.RefailOf)
	}
	// Replayed again, a message re-fails again.
	setStatus(t, h, s, quarantine.StatusReplayed, third)
	fourth := newMsg(withIdem("k-1"))
	insert(t, s, fourth)
	if fourth.RefailOf != third.ID || mustGet(t, s, third.ID).Status != quarantine.StatusRefailed {
		t.Fatalf("fourth failure: RefailOf %q, want %s", fourth.RefailOf, third.ID)
	}
	third.Status = quarantine.StatusRefailed
	counts, err := s.CountByQueue(ctx, quarantine.Filter{})
	wantOK(t, err, "CountByQueue")
	all := []*quarantine.Message{older, newer, quarantined, noKey, other, again1, again2, q2, empty, third, fourth}
	if want := expectedCounts(quarantine.Filter{}, all); !slices.Equal(counts, want) {
		t.Fatalf("CountByQueue = %v, want %v", counts, want)
	}
}

// mustGet returns the stored message id.
func mustGet(t *testing.T, s store.Store, id string) *quarantine.Message {
	t.Helper()
	m, err := s.GetMessage(t.Context(), id)
	wantOK(t, err, "GetMessage")
	return m
}

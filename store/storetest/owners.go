package storetest

import (
	"maps"
	"testing"

	"github.com/quarantine-dev/quarantine"
)

// testMessageOwners: MessageOwners gives the owner of every stored id in
// the list, leaves out unknown ids and what is not an id at all, and
// answers an empty list with an empty map.
func testMessageOwners(t *testing.T, h Harness) {
	s := h.Open(t)
	ctx := t.Context()
	a, b, c := newMsg(withOwner("payments")), newMsg(withOwner("orders")), newMsg(withOwner(""))
	insert(t, s, a, b, c)
	unknown := quarantine.NewID(baseTime)
	got, err := s.MessageOwners(ctx, []string{a.ID, unknown, b.ID, "not an id", "\xff\x00", c.ID, a.ID})
	wantOK(t, err, "MessageOwners")
	want := map[string]string{a.ID: "payments", b.ID: "orders", c.ID: ""}
	if !maps.Equal(got, want) {
		t.Fatalf("MessageOwners = %v, want %v", got, want)
	}
	got, err = s.MessageOwners(ctx, nil)
	wantOK(t, err, "MessageOwners(nil)")
	if got == nil || len(got) != 0 {
		t.Fatalf("MessageOwners(nil) = %#v, want an empty map", got)
	}
}

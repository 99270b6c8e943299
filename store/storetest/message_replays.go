package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// testMessageReplays: a message's items of every batch that held it,
// oldest batch first, the latest limit ones, with each outcome and the
// re-failure link; other messages' items are not among them.
func testMessageReplays(t *testing.T, h Harness) {
	s, _ := openClock(t, h)
	ctx := t.Context()
	m := newMsg(withIdem("k-timeline"))
	other := newMsg(withIdem("k-other"))
	never := newMsg()
	insert(t, s, m, other, never)

	// First batch: m and other, published; m then re-fails.
	b1 := createReplay(t, s, replayReq(m.ID, other.ID), nil)
	leases, err := s.LeaseReplayItems(ctx, b1.ID, "engine", 10, time.Minute, 0)
	wantOK(t, err, "LeaseReplayItems")
	var res []quarantine.ReplayResult
	for _, l := range leases {
		res = append(res, published(l))
	}
	_, err = s.RecordReplayResults(ctx, res)
	wantOK(t, err, "RecordReplayResults")
	refail := newMsg(withIdem("k-timeline"))
	insert(t, s, refail)
	if refail.RefailOf != m.ID {
		t.Fatalf("re-failure links %q, want %s", refail.RefailOf, m.ID)
	}

	// Second batch: m (refailed now) is skipped at creation or pending;
	// third batch: other alone.
	b2 := createReplay(t, s, replayReq(m.ID), nil)
	createReplay(t, s, replayReq(other.ID), nil)

	got, err := s.MessageReplayItems(ctx, m.ID, 10)
	wantOK(t, err, "MessageReplayItems")
	var batches []string
	for _, it := range got {
		if it.MessageID != m.ID {
			t.Fatalf("item of %s among %s's", it.MessageID, m.ID)
		}
		batches = append(batches, it.BatchID)
	}
	// Oldest first means by batch id. IDs made for one millisecond sort in
	// creation order only while the clock does not go back, and parallel
	// tests with their own fixed clocks interleave: expect the ids' order.
	want := []string{b1.ID, b2.ID}
	slices.Sort(want)
	if !slices.Equal(batches, want) {
		t.Fatalf("batches %v, want %v (oldest first)", batches, want)
	}
	first := got[slices.Index(batches, b1.ID)]
	if first.Outcome != quarantine.ItemRefailed || first.RefailID != refail.ID || first.PublishedAt == nil ||
		first.Destination == "" || first.PayloadSHA256 != m.PayloadSHA256 {
		t.Fatalf("first item %+v: want refailed as %s, published, with its destination and hash", first, refail.ID)
	}
	want2 := items(t, s, b2.ID)[0]
	if second := got[slices.Index(batches, b2.ID)]; second.Outcome != want2.Outcome || second.Reason != want2.Reason {
		t.Fatalf("second item %+v, want %+v", second, want2)
	}

	// The limit keeps the latest batches.
	last, err := s.MessageReplayItems(ctx, m.ID, 1)
	wantOK(t, err, "MessageReplayItems")
	if len(last) != 1 || last[0].BatchID != want[1] {
		t.Fatalf("limit 1: %+v, want the item of %s", last, want[1])
	}
	// None for a message never replayed, an unknown id or a malformed one.
	for _, id := range []string{never.ID, quarantine.NewID(baseTime), "'; DROP TABLE replay_items; --"} {
		none, err := s.MessageReplayItems(ctx, id, 10)
		wantOK(t, err, "MessageReplayItems")
		if none == nil || len(none) != 0 {
			t.Fatalf("%q: %+v, want an empty list", id, none)
		}
	}
	for _, n := range []int{0, -1, quarantine.MaxLimit + 1} {
		_, err := s.MessageReplayItems(ctx, m.ID, n)
		wantCode(t, err, quarantine.EINVALID)
	}
}

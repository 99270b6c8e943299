package storetest

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// The hold of a message by a replay item in flight: the lease leaves the
// message's row as it is, and the item holds it (from its lease until its
// outcome is recorded, an expired lease included) against a discard, an
// edit and another batch's lease.

// testReplayHold: while an item of batch a holds its message (quarantined
// still), a discard by id, by filter and by operation refuses it with a
// discard_refused event, an edit is ECONFLICT, and another batch's lease
// skips it as replayed by a; after a crash (the lease expired) it still
// does, and only a's next lease takes the item again; the record moves
// the message once. A cancel ends the hold.
func testReplayHold(t *testing.T, h Harness) {
	s, clock := openClock(t, h)
	ctx := t.Context()
	m, other := newMsg(withQueue("hold")), newMsg(withQueue("hold-cancel"))
	insert(t, s, m, other)
	a := createReplay(t, s, replayReq(m.ID), nil)
	b := createReplay(t, s, replayReq(m.ID), nil) // pins m too: the first lease wins
	ls, err := s.LeaseReplayItems(ctx, a.ID, "engine-1", 10, time.Minute, 0)
	wantOK(t, err, "LeaseReplayItems")
	if len(ls) != 1 {
		t.Fatalf("leased %d items of a, want 1", len(ls))
	}
	wantStatuses(t, s, []*quarantine.Message{m}) // quarantined: the item holds it

	refused := func(when string) {
		t.Helper()
		res, err := s.Discard(ctx, quarantine.Discard{IDs: []string{m.ID}, Reason: "junk", Actor: "bob"})
		wantOK(t, err, "Discard by id")
		wantHeldSkip(t, when+": a discard by id", res, m.ID, a.ID)
		res, err = s.Discard(ctx, quarantine.Discard{Filter: &quarantine.Filter{Queue: []string{"hold"}}, Reason: "junk", Actor: "bob"})
		wantOK(t, err, "Discard by filter")
		wantHeldSkip(t, when+": a discard by filter", res, m.ID, a.ID)
		op, err := s.StartDiscard(ctx, quarantine.Discard{Filter: &quarantine.Filter{Queue: []string{"hold"}}, Reason: "junk", Actor: "bob"}, 0)
		wantOK(t, err, "StartDiscard")
		op, res, err = s.DiscardChunk(ctx, op.ID, 10)
		wantOK(t, err, "DiscardChunk")
		wantHeldSkip(t, when+": a discard operation", res, m.ID, a.ID)
		if op.State != quarantine.DiscardCompleted || op.Discarded != 0 || op.Skipped != 1 {
			t.Fatalf("%s: discard operation %+v, want completed with 1 skipped", when, op)
		}
		_, err = s.EditPayload(ctx, edit(m, m.PayloadSHA256, []byte(`{"x":1}`)))
		wantCode(t, err, quarantine.ECONFLICT)
		wantStatuses(t, s, []*quarantine.Message{m})
	}
	refused("in flight")
	if n := len(auditOf(t, s, m.ID, quarantine.ActionDiscardRefused)); n != 3 {
		t.Fatalf("%d discard_refused events, want one per refused discard (3)", n)
	}

	none, err := s.LeaseReplayItems(ctx, b.ID, "engine-2", 10, time.Minute, 0)
	wantOK(t, err, "LeaseReplayItems of b")
	if len(none) != 0 {
		t.Fatalf("b leased %d items of a message a holds", len(none))
	}
	wantItem(t, items(t, s, b.ID), m.ID, quarantine.ItemSkipped, "replayed by batch "+a.ID)

	// The engine dies mid-publish: its lease expires, the item still
	// holds the message, and only a's next lease takes it again.
	clock.Advance(2 * time.Minute)
	c := createReplay(t, s, replayReq(m.ID), nil)
	none, err = s.LeaseReplayItems(ctx, c.ID, "engine-2", 10, time.Minute, 0)
	wantOK(t, err, "LeaseReplayItems of c")
	if len(none) != 0 {
		t.Fatalf("c leased %d items of a message whose holder's lease expired", len(none))
	}
	wantItem(t, items(t, s, c.ID), m.ID, quarantine.ItemSkipped, "replayed by batch "+a.ID)
	refused("lease expired")
	again, err := s.LeaseReplayItems(ctx, a.ID, "engine-2", 10, time.Minute, 0)
	wantOK(t, err, "LeaseReplayItems of a again")
	if len(again) != 1 || again[0].Fence == ls[0].Fence {
		t.Fatalf("a's next lease took %d items (fence %v), want its item again with a new fence", len(again), again)
	}
	if stale, err := s.RecordReplayResults(ctx, []quarantine.ReplayResult{published(ls[0])}); err != nil || len(stale) != 1 {
		t.Fatalf("a result of the expired lease: stale %v, %v; want refused", stale, err)
	}
	wantStatuses(t, s, []*quarantine.Message{m})
	if stale, err := s.RecordReplayResults(ctx, []quarantine.ReplayResult{published(again[0])}); err != nil || len(stale) != 0 {
		t.Fatalf("RecordReplayResults = %v, %v", stale, err)
	}
	m.Status = quarantine.StatusReplayed
	wantStatuses(t, s, []*quarantine.Message{m})
	if got, err := s.GetMessage(ctx, m.ID); err != nil || got.ReplayCount != 1 {
		t.Fatalf("replayed message: %+v, %v; want replay_count 1", got, err)
	}

	// A cancel ends the hold: the message can be discarded then.
	d := createReplay(t, s, replayReq(other.ID), nil)
	if ls, err := s.LeaseReplayItems(ctx, d.ID, "engine-1", 10, time.Minute, 0); err != nil || len(ls) != 1 {
		t.Fatalf("LeaseReplayItems of d = %d, %v", len(ls), err)
	}
	clock.Advance(2 * time.Minute) // the lease expired: the cancel fences it
	_, err = change(t, s, d.ID, quarantine.ReplayActCancel)
	wantOK(t, err, "cancel")
	res, err := s.Discard(ctx, quarantine.Discard{IDs: []string{other.ID}, Reason: "junk", Actor: "bob"})
	wantOK(t, err, "Discard after the cancel")
	if len(res.Changed) != 1 {
		t.Fatalf("a discard after the cancel: %+v, want the message discarded", res)
	}
	wantChain(t, s)
}

// wantHeldSkip fails unless res skipped id, held by batch.
func wantHeldSkip(t *testing.T, what string, res quarantine.BulkResult, id, batch string) {
	t.Helper()
	if len(res.Changed) != 0 || len(res.Skipped) != 1 || res.Skipped[0].ID != id || !strings.Contains(res.Skipped[0].Reason, batch) {
		t.Fatalf("%s: %+v, want %s skipped as held by batch %s", what, res, id, batch)
	}
}

// testReplayHoldRace races the leases of two batches pinning the same
// message and a discard of it: exactly one of the three wins, on both
// sides of an expired lease of the first batch (an engine that died
// mid-publish: then the first batch's next lease must win). The winning
// lease's message stays quarantined until its record moves it to
// replayed; the losers say who won.
func testReplayHoldRace(t *testing.T, h Harness) {
	s, clock := openClock(t, h)
	ctx := t.Context()
	for round := range 8 {
		m := newMsg()
		insert(t, s, m)
		a := createReplay(t, s, replayReq(m.ID), nil)
		b := createReplay(t, s, replayReq(m.ID), nil)
		crashed := round%2 == 1
		if crashed { // a leased it before and died: the lease expired
			if ls, err := s.LeaseReplayItems(ctx, a.ID, "dead", 1, time.Minute, 0); err != nil || len(ls) != 1 {
				t.Fatalf("round %d: the first lease of a = %d, %v", round, len(ls), err)
			}
			clock.Advance(2 * time.Minute)
		}
		var wg sync.WaitGroup
		var la, lb []quarantine.ReplayLease
		var res quarantine.BulkResult
		var errA, errB, errD error
		wg.Add(3)
		go func() {
			defer wg.Done()
			la, errA = s.LeaseReplayItems(ctx, a.ID, "engine-a", 1, time.Minute, 0)
		}()
		go func() {
			defer wg.Done()
			lb, errB = s.LeaseReplayItems(ctx, b.ID, "engine-b", 1, time.Minute, 0)
		}()
		go func() {
			defer wg.Done()
			res, errD = s.Discard(ctx, quarantine.Discard{IDs: []string{m.ID}, Reason: "junk", Actor: "bob"})
		}()
		wg.Wait()
		wantOK(t, errA, "LeaseReplayItems of a")
		wantOK(t, errB, "LeaseReplayItems of b")
		wantOK(t, errD, "Discard")
		wins := 0
		for _, won := range []bool{len(la) == 1, len(lb) == 1, len(res.Changed) == 1} {
			if won {
				wins++
			}
		}
		if wins != 1 {
			t.Fatalf("round %d: a leased %d, b leased %d, the discard changed %d: exactly one must win", round, len(la), len(lb), len(res.Changed))
		}
		if crashed && len(la) != 1 {
			t.Fatalf("round %d: a's item held the message since its expired lease, yet b leased %d, the discard changed %d",
				round, len(lb), len(res.Changed))
		}
		winner, loser, won := a, b, la
		if len(lb) == 1 {
			winner, loser, won = b, a, lb
		}
		if len(res.Changed) == 1 {
			wantItem(t, items(t, s, a.ID), m.ID, quarantine.ItemSkipped, "discarded")
			wantItem(t, items(t, s, b.ID), m.ID, quarantine.ItemSkipped, "discarded")
			m.Status = quarantine.StatusDiscarded
			wantStatuses(t, s, []*quarantine.Message{m})
			continue
		}
		wantItem(t, items(t, s, loser.ID), m.ID, quarantine.ItemSkipped, "replayed by batch "+winner.ID)
		wantHeldSkip(t, "the discard", res, m.ID, winner.ID)
		wantStatuses(t, s, []*quarantine.Message{m})
		if stale, err := s.RecordReplayResults(ctx, []quarantine.ReplayResult{published(won[0])}); err != nil || len(stale) != 0 {
			t.Fatalf("round %d: RecordReplayResults = %v, %v", round, stale, err)
		}
		m.Status = quarantine.StatusReplayed
		wantStatuses(t, s, []*quarantine.Message{m})
	}
	wantChain(t, s)
}

// testReplayOlderReplaying: messages an older version moved to replaying
// at their lease are recorded (replayed, or quarantined again when the
// publish failed), released by a cancel, refused to a discard and taken
// again by their own batch's next lease, as before.
func testReplayOlderReplaying(t *testing.T, h Harness) {
	s, clock := openClock(t, h)
	ctx := t.Context()
	pub, failed, held, cancelled := newMsg(), newMsg(), newMsg(), newMsg()
	insert(t, s, pub, failed, held, cancelled)
	a := createReplay(t, s, replayReq(pub.ID, failed.ID, held.ID), nil)
	c := createReplay(t, s, replayReq(cancelled.ID), nil)
	ls, err := s.LeaseReplayItems(ctx, a.ID, "engine", 10, time.Minute, 0)
	wantOK(t, err, "LeaseReplayItems")
	lc, err := s.LeaseReplayItems(ctx, c.ID, "engine", 10, time.Minute, 0)
	wantOK(t, err, "LeaseReplayItems")
	if len(ls) != 3 || len(lc) != 1 {
		t.Fatalf("leased %d and %d", len(ls), len(lc))
	}
	setStatus(t, h, s, quarantine.StatusReplaying, pub, failed, held, cancelled) // as an older version left them
	byID := leasesByMessage(ls)
	fail := published(byID[failed.ID])
	fail.Outcome, fail.Reason = quarantine.ItemFailed, "NOT_FOUND"
	if stale, err := s.RecordReplayResults(ctx, []quarantine.ReplayResult{published(byID[pub.ID]), fail}); err != nil || len(stale) != 0 {
		t.Fatalf("RecordReplayResults = %v, %v", stale, err)
	}
	clock.Advance(2 * time.Minute)
	_, err = change(t, s, c.ID, quarantine.ReplayActCancel)
	wantOK(t, err, "cancel")
	pub.Status, failed.Status, held.Status, cancelled.Status = quarantine.StatusReplayed, quarantine.StatusQuarantined,
		quarantine.StatusReplaying, quarantine.StatusQuarantined
	wantStatuses(t, s, []*quarantine.Message{pub, failed, held, cancelled})

	// held's lease expired: a discard is refused, a's next lease takes
	// it again.
	res, err := s.Discard(ctx, quarantine.Discard{IDs: []string{held.ID}, Reason: "junk", Actor: "bob"})
	wantOK(t, err, "Discard")
	if len(res.Changed) != 0 {
		t.Fatalf("a discard of a replaying message changed it: %+v", res)
	}
	again, err := s.LeaseReplayItems(ctx, a.ID, "engine-2", 10, time.Minute, 0)
	wantOK(t, err, "LeaseReplayItems again")
	if len(again) != 1 || again[0].Item.MessageID != held.ID {
		t.Fatalf("a's next lease took %d items, want held's again", len(again))
	}
	if stale, err := s.RecordReplayResults(ctx, []quarantine.ReplayResult{published(again[0])}); err != nil || len(stale) != 0 {
		t.Fatalf("RecordReplayResults = %v, %v", stale, err)
	}
	held.Status = quarantine.StatusReplayed
	wantStatuses(t, s, []*quarantine.Message{pub, held})
	wantChain(t, s)
}

// leasesByMessage returns the leases by message id.
func leasesByMessage(ls []quarantine.ReplayLease) map[string]quarantine.ReplayLease {
	out := make(map[string]quarantine.ReplayLease, len(ls))
	for _, l := range ls {
		out[l.Item.MessageID] = l
	}
	return out
}

// testReplayEarlyRefail: a dead letter that comes back while the item
// that published it is still in flight (its record not yet made) links
// to the held message, though its status is still quarantined; a
// quarantined message merely pinned is not linked. The record then makes
// the item refailed, and the message stays refailed.
func testReplayEarlyRefail(t *testing.T, h Harness) {
	s := h.Open(t)
	ctx := t.Context()
	m, pinned := newMsg(withIdem("early-key")), newMsg(withIdem("pinned-key"))
	insert(t, s, m, pinned)
	a := createReplay(t, s, replayReq(m.ID), nil)
	createReplay(t, s, replayReq(pinned.ID), nil) // pinned, never leased
	ls, err := s.LeaseReplayItems(ctx, a.ID, "engine", 1, time.Minute, 0)
	wantOK(t, err, "LeaseReplayItems")
	if len(ls) != 1 {
		t.Fatalf("leased %d", len(ls))
	}
	back, other := newMsg(withIdem("early-key")), newMsg(withIdem("pinned-key"))
	insert(t, s, back, other)
	if back.RefailOf != m.ID || other.RefailOf != "" {
		t.Fatalf("RefailOf %q and %q, want %s and none", back.RefailOf, other.RefailOf, m.ID)
	}
	if it := wantItem(t, items(t, s, a.ID), m.ID, quarantine.ItemPending, ""); it.RefailID != back.ID {
		t.Fatalf("the item in flight notes %q, want %s", it.RefailID, back.ID)
	}
	m.Status = quarantine.StatusRefailed
	wantStatuses(t, s, []*quarantine.Message{m, pinned})
	if stale, err := s.RecordReplayResults(ctx, []quarantine.ReplayResult{published(ls[0])}); err != nil || len(stale) != 0 {
		t.Fatalf("RecordReplayResults = %v, %v", stale, err)
	}
	wantItem(t, items(t, s, a.ID), m.ID, quarantine.ItemRefailed, "")
	wantStatuses(t, s, []*quarantine.Message{m})
	if got, err := s.GetMessage(ctx, m.ID); err != nil || got.ReplayCount != 1 {
		t.Fatalf("message %+v, %v; want replay_count 1", got, err)
	}
	wantChain(t, s)
}

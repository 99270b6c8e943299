package storetest

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
)

func testReplayLease(t *testing.T, h Harness) {
	runParallel(t, h, []subtest{
		{"Fence", testReplayFence},
		{"Release", testReplayRelease},
		{"Refusal", testReplayRefusal},
		{"Complete", testReplayComplete},
		{"Concurrent", testReplayConcurrentLeases},
		{"Refail", testReplayRefail},
		{"DiscardRace", testReplayDiscardRace},
		{"Hold", testReplayHold},
		{"HoldRace", testReplayHoldRace},
		{"OlderReplaying", testReplayOlderReplaying},
		{"EarlyRefail", testReplayEarlyRefail},
		{"GroupCounts", testReplayGroupCounts},
	})
}

// published is the result of a publish of l that the broker confirmed.
func published(l quarantine.ReplayLease) quarantine.ReplayResult {
	return quarantine.ReplayResult{BatchID: l.Item.BatchID, MessageID: l.Item.MessageID, Fence: l.Fence,
		Outcome: quarantine.ItemPublished, Destination: "memory:src-a/" + l.Message.Queue,
		PayloadVersion: l.Message.PayloadVersion, PayloadSHA256: l.Message.PayloadSHA256,
		DroppedHeaders: []string{"authorization"}, At: baseTime.Add(48 * time.Hour)}
}

func leaseSeqs(ls []quarantine.ReplayLease) []int {
	out := make([]int, len(ls))
	for i, l := range ls {
		out[i] = l.Item.Seq
	}
	return out
}

func testReplayFence(t *testing.T, h Harness) {
	s, clock := openClock(t, h)
	ctx := t.Context()
	var msgs []*quarantine.Message
	for range 4 {
		msgs = append(msgs, newMsg())
	}
	insert(t, s, msgs...)
	// The payload leased is the current one.
	edited, err := s.EditPayload(ctx, quarantine.PayloadEdit{MessageID: msgs[0].ID, Payload: []byte(`{"fixed":true}`),
		IfMatch: msgs[0].PayloadSHA256, Reason: "fix", Actor: "bob"})
	wantOK(t, err, "EditPayload")
	batch := createReplay(t, s, replayReq(ids(msgs)...), nil)

	// The canary bound: only seq < 1.
	first, err := s.LeaseReplayItems(ctx, batch.ID, "engine-1", 10, time.Minute, 1)
	wantOK(t, err, "LeaseReplayItems")
	if !slices.Equal(leaseSeqs(first), []int{0}) || first[0].Fence != 1 || first[0].Item.Attempts != 1 {
		t.Fatalf("canary lease %v (fence %v)", leaseSeqs(first), first)
	}
	if string(first[0].Message.Payload) != `{"fixed":true}` || first[0].Message.PayloadVersion != 2 || first[0].Message.PayloadSHA256 != edited.PayloadSHA256 {
		t.Fatalf("leased message carries payload %q v%d, want the edited one", first[0].Message.Payload, first[0].Message.PayloadVersion)
	}
	rest, err := s.LeaseReplayItems(ctx, batch.ID, "engine-1", 2, time.Minute, 0)
	wantOK(t, err, "LeaseReplayItems")
	if !slices.Equal(leaseSeqs(rest), []int{1, 2}) {
		t.Fatalf("second lease %v, want [1 2]", leaseSeqs(rest))
	}
	// The lease of engine-1 expires; engine-2 takes the items over.
	clock.Advance(2 * time.Minute)
	over, err := s.LeaseReplayItems(ctx, batch.ID, "engine-2", 10, time.Minute, 0)
	wantOK(t, err, "LeaseReplayItems")
	if !slices.Equal(leaseSeqs(over), []int{0, 1, 2, 3}) {
		t.Fatalf("take-over lease %v, want every item", leaseSeqs(over))
	}
	if over[0].Fence != first[0].Fence+1 || over[0].Item.Attempts != 2 || over[3].Item.Attempts != 1 {
		t.Fatalf("take-over fences/attempts: %+v", over)
	}
	// engine-1's late result is refused; engine-2's is recorded.
	stale, err := s.RecordReplayResults(ctx, []quarantine.ReplayResult{published(first[0]), published(over[0])})
	wantOK(t, err, "RecordReplayResults")
	if !slices.Equal(stale, []int{0}) {
		t.Fatalf("stale %v, want [0]", stale)
	}
	// A result recorded twice: the second is stale.
	stale, err = s.RecordReplayResults(ctx, []quarantine.ReplayResult{published(over[0])})
	wantOK(t, err, "RecordReplayResults")
	if !slices.Equal(stale, []int{0}) {
		t.Fatalf("a repeated result: stale %v, want [0]", stale)
	}
	it := wantItem(t, items(t, s, batch.ID), msgs[0].ID, quarantine.ItemPublished, "")
	if it.PayloadVersion != 2 || it.PayloadSHA256 != edited.PayloadSHA256 || !slices.Equal(it.DroppedHeaders, []string{"authorization"}) ||
		it.PublishedAt == nil || !it.PublishedAt.Equal(baseTime.Add(48*time.Hour).Truncate(time.Microsecond)) ||
		it.Destination != "memory:src-a/orders" || it.Attempts != 2 {
		t.Fatalf("published item %+v", it)
	}
	got, err := s.GetMessage(ctx, msgs[0].ID)
	wantOK(t, err, "GetMessage")
	if got.Status != quarantine.StatusReplayed || got.ReplayCount != 1 {
		t.Fatalf("published message: %s, replay_count %d", got.Status, got.ReplayCount)
	}
	// A failed publish returns the message to quarantined.
	fail := published(over[1])
	fail.Outcome, fail.Reason = quarantine.ItemFailed, "NOT_FOUND - no queue 'orders'"
	stale, err = s.RecordReplayResults(ctx, []quarantine.ReplayResult{fail})
	wantOK(t, err, "RecordReplayResults")
	if len(stale) != 0 {
		t.Fatalf("stale %v", stale)
	}
	wantItem(t, items(t, s, batch.ID), msgs[1].ID, quarantine.ItemFailed, fail.Reason)
	// The messages of the items still in flight keep their status: the
	// items hold them.
	msgs[0].Status = quarantine.StatusReplayed
	wantStatuses(t, s, msgs)
	bad := published(over[2])
	bad.Outcome = quarantine.ItemPending
	_, err = s.RecordReplayResults(ctx, []quarantine.ReplayResult{bad})
	wantCode(t, err, quarantine.EINVALID)
	wantChain(t, s)
}

func testReplayRelease(t *testing.T, h Harness) {
	s := h.Open(t)
	ctx := t.Context()
	a, b := newMsg(), newMsg()
	insert(t, s, a, b)
	batch := createReplay(t, s, replayReq(a.ID, b.ID), nil)
	ls, err := s.LeaseReplayItems(ctx, batch.ID, "engine-1", 10, time.Hour, 0)
	wantOK(t, err, "LeaseReplayItems")
	if len(ls) != 2 {
		t.Fatalf("leased %d", len(ls))
	}
	none, err := s.LeaseReplayItems(ctx, batch.ID, "engine-2", 10, time.Hour, 0)
	wantOK(t, err, "LeaseReplayItems")
	if len(none) != 0 {
		t.Fatalf("leased items were leased again: %v", leaseSeqs(none))
	}
	old := ls[1]
	old.Fence-- // a release with a stale fence is ignored
	wantOK(t, s.ReleaseReplayItems(ctx, []quarantine.ReplayLease{ls[0], old}), "ReleaseReplayItems")
	again, err := s.LeaseReplayItems(ctx, batch.ID, "engine-2", 10, time.Hour, 0)
	wantOK(t, err, "LeaseReplayItems")
	if !slices.Equal(leaseSeqs(again), []int{0}) || again[0].Fence != ls[0].Fence+1 {
		t.Fatalf("after release leased %v", again)
	}
	// Paused: no leases.
	_, err = change(t, s, batch.ID, quarantine.ReplayActPause)
	wantOK(t, err, "pause")
	wantOK(t, s.ReleaseReplayItems(ctx, again), "ReleaseReplayItems")
	paused, err := s.LeaseReplayItems(ctx, batch.ID, "engine-2", 10, time.Hour, 0)
	wantOK(t, err, "LeaseReplayItems")
	if len(paused) != 0 {
		t.Fatalf("a paused batch leased %v", leaseSeqs(paused))
	}
	wantChain(t, s)
}

// A release that carries a refusal counts it on the item and keeps it as
// the pending item's reason; a plain release (a lost connection, a
// shutdown) and a release with a stale fence count nothing.
func testReplayRefusal(t *testing.T, h Harness) {
	s := h.Open(t)
	ctx := t.Context()
	a := newMsg()
	insert(t, s, a)
	batch := createReplay(t, s, replayReq(a.ID), nil)
	lease := func() quarantine.ReplayLease {
		t.Helper()
		ls, err := s.LeaseReplayItems(ctx, batch.ID, "engine", 10, time.Hour, 0)
		wantOK(t, err, "LeaseReplayItems")
		if len(ls) != 1 {
			t.Fatalf("leased %d items, want 1", len(ls))
		}
		return ls[0]
	}
	check := func(l quarantine.ReplayLease, refusals int, reason string) {
		t.Helper()
		it := items(t, s, batch.ID)[0]
		if it.Outcome != quarantine.ItemPending || it.Refusals != refusals || it.Reason != reason || l.Item.Refusals != refusals {
			t.Fatalf("item %+v (leased with %d refusals); want pending, %d refusals, reason %q", it, l.Item.Refusals, refusals, reason)
		}
	}
	l := lease()
	check(l, 0, "")
	l.Refusal = "rabbitmq: the broker refused (nacked) the message"
	wantOK(t, s.ReleaseReplayItems(ctx, []quarantine.ReplayLease{l}), "ReleaseReplayItems")
	l = lease()
	check(l, 1, "rabbitmq: the broker refused (nacked) the message")
	stale := l
	stale.Fence--
	stale.Refusal = "stale"
	wantOK(t, s.ReleaseReplayItems(ctx, []quarantine.ReplayLease{stale}), "ReleaseReplayItems")
	l.Refusal = "queue full\x00" + strings.Repeat("x", quarantine.MaxReasonBytes)
	wantOK(t, s.ReleaseReplayItems(ctx, []quarantine.ReplayLease{l}), "ReleaseReplayItems")
	l = lease()
	check(l, 2, quarantine.ClipReason("queue full\x00"+strings.Repeat("x", quarantine.MaxReasonBytes)))
	wantOK(t, s.ReleaseReplayItems(ctx, []quarantine.ReplayLease{l}), "ReleaseReplayItems")
	l = lease()
	check(l, 2, quarantine.ClipReason("queue full\x00"+strings.Repeat("x", quarantine.MaxReasonBytes)))
	if l.Item.Attempts != 4 {
		t.Fatalf("attempts %d after 4 leases", l.Item.Attempts)
	}
	r := published(l)
	stale2, err := s.RecordReplayResults(ctx, []quarantine.ReplayResult{r})
	wantOK(t, err, "RecordReplayResults")
	if len(stale2) != 0 {
		t.Fatalf("stale %v", stale2)
	}
	if it := items(t, s, batch.ID)[0]; it.Outcome != quarantine.ItemPublished || it.Refusals != 2 || it.Reason != "" {
		t.Fatalf("published item %+v: want its refusals kept and no reason", it)
	}
	wantChain(t, s)
}

func testReplayComplete(t *testing.T, h Harness) {
	s := h.Open(t)
	ctx := t.Context()
	a, b := newMsg(), newMsg()
	insert(t, s, a, b)
	batch := createReplay(t, s, replayReq(a.ID, b.ID, quarantine.NewID(baseTime)), nil)
	ls, err := s.LeaseReplayItems(ctx, batch.ID, "engine", 10, time.Hour, 0)
	wantOK(t, err, "LeaseReplayItems")
	dup := published(ls[1])
	dup.Outcome = quarantine.ItemDeduplicated
	_, err = s.RecordReplayResults(ctx, []quarantine.ReplayResult{published(ls[0])})
	wantOK(t, err, "RecordReplayResults")
	if got, _ := s.GetReplay(ctx, batch.ID); got.State != quarantine.ReplayRunning {
		t.Fatalf("batch with a pending item is %s", got.State)
	}
	_, err = s.RecordReplayResults(ctx, []quarantine.ReplayResult{dup})
	wantOK(t, err, "RecordReplayResults")
	got, err := s.GetReplay(ctx, batch.ID)
	wantOK(t, err, "GetReplay")
	if got.State != quarantine.ReplayCompleted || got.FinishedAt == nil || got.Done() != 3 ||
		got.Counts[quarantine.ItemPublished] != 1 || got.Counts[quarantine.ItemDeduplicated] != 1 {
		t.Fatalf("batch after the last result: %+v", got)
	}
	evs := auditOf(t, s, batch.ID, quarantine.ActionReplayDone)
	if len(evs) != 1 || evs[0].Actor != "system" {
		t.Fatalf("complete events %v", evs)
	}
	a.Status, b.Status = quarantine.StatusReplayed, quarantine.StatusReplayed
	wantStatuses(t, s, []*quarantine.Message{a, b})

	// A batch with nothing to publish completes at once.
	empty := createReplay(t, s, replayReq(a.ID), nil)
	if empty.State != quarantine.ReplayCompleted || empty.Counts[quarantine.ItemSkipped] != 1 {
		t.Fatalf("a batch with nothing pending is %+v", empty)
	}
	wantChain(t, s)
}

func testReplayConcurrentLeases(t *testing.T, h Harness) {
	s := h.Open(t)
	ctx := t.Context()
	var msgs []*quarantine.Message
	for range 200 {
		msgs = append(msgs, newMsg(withQueue("conc")))
	}
	insert(t, s, msgs...)
	r := replayReq()
	r.IDs, r.Filter = nil, &quarantine.Filter{Queue: []string{"conc"}}
	batch := createReplay(t, s, r, nil)
	if batch.Counts[quarantine.ItemPending] != 200 {
		t.Fatalf("batch %+v", batch)
	}
	var mu sync.Mutex
	leased := map[int]int{}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				ls, err := s.LeaseReplayItems(ctx, batch.ID, "engine-"+string(rune('a'+w)), 7, time.Hour, 0)
				if err != nil {
					errs <- err
					return
				}
				if len(ls) == 0 {
					return
				}
				mu.Lock()
				for _, l := range ls {
					leased[l.Item.Seq]++
				}
				mu.Unlock()
				if w%2 == 0 { // half the engines record as they go
					res := make([]quarantine.ReplayResult, len(ls))
					for i, l := range ls {
						res[i] = published(l)
					}
					if stale, err := s.RecordReplayResults(ctx, res); err != nil || len(stale) > 0 {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("a leaser failed: %v", err)
	}
	if len(leased) != 200 {
		t.Fatalf("%d items leased, want 200", len(leased))
	}
	for seq, n := range leased {
		if n != 1 {
			t.Fatalf("item %d leased %d times", seq, n)
		}
	}
	wantChain(t, s)
}

func testReplayRefail(t *testing.T, h Harness) {
	s := h.Open(t)
	ctx := t.Context()
	m := newMsg(withIdem("refail-key"))
	insert(t, s, m)
	batch := createReplay(t, s, replayReq(m.ID), nil)
	ls, err := s.LeaseReplayItems(ctx, batch.ID, "engine", 1, time.Hour, 0)
	wantOK(t, err, "LeaseReplayItems")
	_, err = s.RecordReplayResults(ctx, []quarantine.ReplayResult{published(ls[0])})
	wantOK(t, err, "RecordReplayResults")

	again := newMsg(withIdem("refail-key"))
	insert(t, s, again)
	if again.RefailOf != m.ID {
		t.Fatalf("RefailOf %q, want %s", again.RefailOf, m.ID)
	}
	it := wantItem(t, items(t, s, batch.ID), m.ID, quarantine.ItemRefailed, "")
	if it.RefailID != again.ID {
		t.Fatalf("refailed item names %q, want %s", it.RefailID, again.ID)
	}
	got, err := s.GetReplay(ctx, batch.ID)
	wantOK(t, err, "GetReplay")
	if got.Counts[quarantine.ItemRefailed] != 1 || got.Counts[quarantine.ItemPublished] != 0 {
		t.Fatalf("counts %v", got.Counts)
	}
	m.Status = quarantine.StatusRefailed
	wantStatuses(t, s, []*quarantine.Message{m, again})
	wantChain(t, s)
}

// testReplayDiscardRace races a discard against the lease of a pinned
// message: both lock the message, then look at what the other left (its
// status, or the item holding it), so exactly one wins (the lease skips
// the item as "discarded", or the discard refuses the held message).
func testReplayDiscardRace(t *testing.T, h Harness) {
	s := h.Open(t)
	ctx := t.Context()
	for round := range 8 {
		m := newMsg()
		insert(t, s, m)
		batch := createReplay(t, s, replayReq(m.ID), nil)
		var wg sync.WaitGroup
		var leases []quarantine.ReplayLease
		var res quarantine.BulkResult
		var errLease, errDiscard error
		wg.Add(2)
		go func() {
			defer wg.Done()
			leases, errLease = s.LeaseReplayItems(ctx, batch.ID, "engine", 1, time.Minute, 0)
		}()
		go func() {
			defer wg.Done()
			res, errDiscard = s.Discard(ctx, quarantine.Discard{IDs: []string{m.ID}, Reason: "junk", Actor: "bob"})
		}()
		wg.Wait()
		wantOK(t, errLease, "LeaseReplayItems")
		wantOK(t, errDiscard, "Discard")
		got, err := s.GetMessage(ctx, m.ID)
		wantOK(t, err, "GetMessage")
		replayWon := len(leases) == 1
		discardWon := len(res.Changed) == 1
		if replayWon == discardWon {
			t.Fatalf("round %d: leased %v, discard changed %v: exactly one must win", round, replayWon, discardWon)
		}
		want := quarantine.StatusDiscarded
		if replayWon {
			want = quarantine.StatusQuarantined // until the outcome is recorded: the item holds it
		} else {
			wantItem(t, items(t, s, batch.ID), m.ID, quarantine.ItemSkipped, "discarded")
			done, err := s.GetReplay(ctx, batch.ID)
			wantOK(t, err, "GetReplay")
			if done.State != quarantine.ReplayCompleted {
				t.Fatalf("round %d: a batch whose only item was skipped at its lease is %s", round, done.State)
			}
		}
		if got.Status != want {
			t.Fatalf("round %d: message is %s, want %s", round, got.Status, want)
		}
		// The discard's attempt is in the audit log, as a change or as a
		// refusal.
		discards := len(auditOf(t, s, m.ID, quarantine.ActionDiscard))
		refusals := len(auditOf(t, s, m.ID, quarantine.ActionDiscardRefused))
		if discardWon && (discards != 1 || refusals != 0) || replayWon && (discards != 0 || refusals != 1) {
			t.Fatalf("round %d (replay won %v): %d discard and %d refusal events, want the attempt recorded once", round, replayWon, discards, refusals)
		}
	}
	wantChain(t, s)
}

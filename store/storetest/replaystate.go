package storetest

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/replays"
)

// The life of a batch after its creation: expiry, transitions, cancel,
// lists, and the size cap.

func testReplayDraftExpiry(t *testing.T, h Harness) {
	s, clock := openClock(t, h)
	m := newMsg()
	insert(t, s, m)
	r := replayReq(m.ID)
	r.DryRun, r.DraftTTL = true, time.Minute
	draft := createReplay(t, s, r, nil)
	run, err := s.RunnableReplays(t.Context(), clock.Now())
	wantOK(t, err, "RunnableReplays")
	if len(run) != 0 {
		t.Fatalf("a fresh draft is runnable: %v", run)
	}
	clock.Advance(2 * time.Minute)
	run, err = s.RunnableReplays(t.Context(), clock.Now())
	wantOK(t, err, "RunnableReplays")
	if len(run) != 1 || run[0].ID != draft.ID {
		t.Fatalf("RunnableReplays = %v, want the expired draft", run)
	}
	_, err = change(t, s, draft.ID, quarantine.ReplayActStart)
	wantCode(t, err, quarantine.ECONFLICT)
	got, err := s.GetReplay(t.Context(), draft.ID)
	wantOK(t, err, "GetReplay")
	if got.State != quarantine.ReplayExpired || got.FinishedAt == nil {
		t.Fatalf("a draft started past its expiry is %+v, want expired", got)
	}
	if n := len(auditOf(t, s, draft.ID, quarantine.ActionReplayExpire)); n != 1 {
		t.Fatalf("%d expire events", n)
	}
	wantStatuses(t, s, []*quarantine.Message{m})
	wantChain(t, s)
}

func testReplayTransitions(t *testing.T, h Harness) {
	s := h.Open(t)
	m := newMsg()
	insert(t, s, m)
	batch := createReplay(t, s, replayReq(m.ID), nil)
	steps := []struct {
		action string
		want   quarantine.ReplayState
		code   string
	}{
		{quarantine.ReplayActStart, "", quarantine.ECONFLICT},
		{quarantine.ReplayActPause, quarantine.ReplayPaused, ""},
		{quarantine.ReplayActPause, "", quarantine.ECONFLICT},
		{quarantine.ReplayActHalt, "", quarantine.ECONFLICT},
		{quarantine.ReplayActResume, quarantine.ReplayRunning, ""},
		{quarantine.ReplayActHalt, quarantine.ReplayHalted, ""},
		{quarantine.ReplayActResume, quarantine.ReplayRunning, ""},
		{quarantine.ReplayActComplete, "", quarantine.ECONFLICT}, // an item is pending
		{quarantine.ReplayActExpire, "", quarantine.ECONFLICT},
		{quarantine.ReplayActCancel, quarantine.ReplayCancelled, ""},
		{quarantine.ReplayActCancel, "", quarantine.ECONFLICT},
		{quarantine.ReplayActResume, "", quarantine.ECONFLICT},
	}
	state := quarantine.ReplayRunning
	for _, st := range steps {
		got, err := change(t, s, batch.ID, st.action)
		if st.code != "" {
			wantCode(t, err, st.code)
			cur, err := s.GetReplay(t.Context(), batch.ID)
			wantOK(t, err, "GetReplay")
			if cur.State != state {
				t.Fatalf("a refused %s moved the batch from %s to %s", st.action, state, cur.State)
			}
			continue
		}
		wantOK(t, err, st.action)
		if got.State != st.want || got.StateReason != "because "+st.action {
			t.Fatalf("%s: state %s (%q), want %s", st.action, got.State, got.StateReason, st.want)
		}
		state = got.State
	}
	_, err := change(t, s, quarantine.NewID(baseTime), quarantine.ReplayActPause)
	wantCode(t, err, quarantine.ENOTFOUND)
	_, err = change(t, s, batch.ID, "explode")
	wantCode(t, err, quarantine.EINVALID)
	for _, c := range []struct {
		action string
		n      int
	}{{quarantine.ActionReplayPause, 1}, {quarantine.ActionReplayResume, 2}, {quarantine.ActionReplayHalt, 1}, {quarantine.ActionReplayCancel, 1}} {
		if evs := auditOf(t, s, batch.ID, c.action); len(evs) != c.n {
			t.Fatalf("%d %s events, want %d", len(evs), c.action, c.n)
		}
	}
	final, err := s.GetReplay(t.Context(), batch.ID)
	wantOK(t, err, "GetReplay")
	if final.FinishedAt == nil || final.Counts[quarantine.ItemSkipped] != 1 {
		t.Fatalf("cancelled batch %+v", final)
	}
	wantStatuses(t, s, []*quarantine.Message{m})
	wantChain(t, s)
}

func testReplayCancel(t *testing.T, h Harness) {
	s := h.Open(t)
	var msgs []*quarantine.Message
	for range 4 {
		msgs = append(msgs, newMsg())
	}
	insert(t, s, msgs...)
	batch := createReplay(t, s, replayReq(ids(msgs)...), nil)
	ls, err := s.LeaseReplayItems(t.Context(), batch.ID, "engine-1", 3, time.Hour, 0)
	wantOK(t, err, "LeaseReplayItems")
	if len(ls) != 3 {
		t.Fatalf("leased %d items, want 3", len(ls))
	}
	// One result arrives before the cancel: it stays.
	stale, err := s.RecordReplayResults(t.Context(), []quarantine.ReplayResult{published(ls[0])})
	wantOK(t, err, "RecordReplayResults")
	if len(stale) != 0 {
		t.Fatalf("stale %v", stale)
	}
	got, err := change(t, s, batch.ID, quarantine.ReplayActCancel)
	wantOK(t, err, "cancel")
	if got.State != quarantine.ReplayCancelled || got.Counts[quarantine.ItemSkipped] != 3 || got.Counts[quarantine.ItemPublished] != 1 {
		t.Fatalf("cancelled batch %+v", got)
	}
	for _, it := range items(t, s, batch.ID)[1:] {
		if it.Outcome != quarantine.ItemSkipped || it.Reason != "cancelled" {
			t.Fatalf("item %+v after cancel", it)
		}
	}
	msgs[0].Status = quarantine.StatusReplayed
	wantStatuses(t, s, msgs)
	// The engine holding a live lease was publishing while the cancel
	// came: what it published is recorded, the message is replayed. A
	// failure it reports changes nothing (the item stays skipped).
	late := published(ls[1])
	failed := published(ls[2])
	failed.Outcome, failed.Reason = quarantine.ItemFailed, "unroutable"
	stale, err = s.RecordReplayResults(t.Context(), []quarantine.ReplayResult{late, failed})
	wantOK(t, err, "RecordReplayResults")
	if !slices.Equal(stale, []int{1}) {
		t.Fatalf("results after the cancel: stale %v, want [1] (the failure)", stale)
	}
	if it := items(t, s, batch.ID)[ls[1].Item.Seq]; it.Outcome != quarantine.ItemPublished {
		t.Fatalf("the late publish was not recorded: %+v", it)
	}
	msgs[ls[1].Item.Seq].Status = quarantine.StatusReplayed
	wantStatuses(t, s, msgs)
	// Its fence is spent: the same result again is refused.
	stale, err = s.RecordReplayResults(t.Context(), []quarantine.ReplayResult{late})
	wantOK(t, err, "RecordReplayResults")
	if !slices.Equal(stale, []int{0}) {
		t.Fatalf("a repeated result: stale %v, want [0]", stale)
	}
	wantChain(t, s)
}

func testReplayList(t *testing.T, h Harness) {
	s := h.Open(t)
	a, b := newMsg(withQueue("l1")), newMsg(withQueue("l2"))
	insert(t, s, a, b)
	var made []string
	for i := range 5 {
		r := replayReq(a.ID, b.ID)
		r.DryRun = true
		if i%2 == 1 {
			r.IDs = []string{b.ID}
			r.Actor = "carol"
		}
		made = append(made, createReplay(t, s, r, nil).ID)
		time.Sleep(time.Millisecond) // ids are time-ordered
	}
	var got []string
	f := quarantine.ReplayFilter{Limit: 2}
	for pages := 0; ; pages++ {
		list, next, err := s.ListReplays(t.Context(), f)
		wantOK(t, err, "ListReplays")
		for _, bt := range list {
			wantCounts(t, bt)
			got = append(got, bt.ID)
		}
		if next == "" {
			break
		}
		f.After = next
	}
	want := slices.Clone(made)
	slices.Reverse(want)
	if !slices.Equal(got, want) {
		t.Fatalf("pages %v, want newest first %v", got, want)
	}
	for _, c := range []struct {
		f quarantine.ReplayFilter
		n int
	}{
		{quarantine.ReplayFilter{Queue: "l1"}, 3},
		{quarantine.ReplayFilter{Queue: "l2"}, 5},
		{quarantine.ReplayFilter{Actor: "carol"}, 2},
		{quarantine.ReplayFilter{State: []quarantine.ReplayState{quarantine.ReplayDraft}}, 5},
		{quarantine.ReplayFilter{State: []quarantine.ReplayState{quarantine.ReplayRunning}}, 0},
	} {
		list, _, err := s.ListReplays(t.Context(), c.f)
		wantOK(t, err, "ListReplays")
		if len(list) != c.n {
			t.Fatalf("ListReplays(%+v) = %d batches, want %d", c.f, len(list), c.n)
		}
	}
}

// testReplayConfirmAbove: a filter has no fixed cap; above ConfirmAbove a
// batch started at once needs expect_count, a dry run does not. The set
// spans several chunks (ops.Chunk): the pin is written chunk by chunk.
func testReplayConfirmAbove(t *testing.T, h Harness) {
	s, all, r := bulkReplay(t, h)
	ctx := t.Context()
	n := len(all)
	r.ConfirmAbove = n - 1
	_, err := s.CreateReplay(ctx, r, nil)
	wantCode(t, err, quarantine.EUNPROCESSABLE)
	if msg := quarantine.ErrorMessage(err); !contains(msg, strconv.Itoa(n)) || quarantine.ErrorField(err) != "expect_count" {
		t.Fatalf("the refusal does not name expect_count and the count: %q %q", quarantine.ErrorField(err), msg)
	}
	wrong := n - 1
	r.ExpectCount = &wrong
	_, err = s.CreateReplay(ctx, r, nil)
	wantCode(t, err, quarantine.ECONFLICT)
	list, _, err := s.ListReplays(ctx, quarantine.ReplayFilter{})
	wantOK(t, err, "ListReplays")
	if len(list) != 0 {
		t.Fatalf("a refused replay left %d batches", len(list))
	}
	// A dry run needs no confirmation; it pins every message, in id order.
	r.ExpectCount, r.DryRun = nil, true
	var pinning *quarantine.ReplayBatch
	r.OnPinning = func(b *quarantine.ReplayBatch) {
		var err error
		pinning, err = s.GetReplay(ctx, b.ID)
		wantOK(t, err, "GetReplay while pinning")
	}
	draft := createReplay(t, s, r, nil)
	r.OnPinning = nil
	if pinning == nil || pinning.ID != draft.ID || pinning.State != quarantine.ReplayPinning || pinning.PinTotal != n || pinning.Total != 0 {
		t.Fatalf("while pinning: %+v", pinning)
	}
	if evs := auditOf(t, s, draft.ID, quarantine.ActionReplayCreate); len(evs) != 1 {
		t.Fatalf("%d replay.create events, want 1 when the pin settled", len(evs))
	}
	if draft.State != quarantine.ReplayDraft || draft.Total != n || draft.PinTotal != n || draft.Counts[quarantine.ItemPending] != n {
		t.Fatalf("draft: state %s total %d counts %v", draft.State, draft.Total, draft.Counts)
	}
	got, err := s.GetReplay(ctx, draft.ID)
	wantOK(t, err, "GetReplay")
	if got.Counts[quarantine.ItemPending] != n || got.Total != n || !slices.Equal(got.Queues, []string{"bulk"}) {
		t.Fatalf("stored: total %d counts %v queues %v", got.Total, got.Counts, got.Queues)
	}
	wantIDs := ids(all)
	slices.Sort(wantIDs)
	if its := itemsPaged(t, s, draft.ID, quarantine.MaxLimit); !slices.Equal(itemIDs(its), wantIDs) {
		t.Fatalf("the draft pinned %d items, want the %d matching in id order", len(its), n)
	}
	// Confirmed with the previewed count, started at once: no message
	// moves until it is leased.
	r.ExpectCount, r.DryRun = &n, false
	batch := createReplay(t, s, r, nil)
	if batch.State != quarantine.ReplayRunning || batch.Total != n {
		t.Fatalf("confirmed batch: state %s total %d", batch.State, batch.Total)
	}
	counts, err := s.CountByQueue(ctx, quarantine.Filter{Queue: []string{"bulk"}, Status: []quarantine.Status{quarantine.StatusQuarantined}})
	wantOK(t, err, "CountByQueue")
	if len(counts) != 1 || counts[0].Count != int64(n) {
		t.Fatalf("quarantined counts %+v, want %d (a pin moves no message)", counts, n)
	}
	wantChain(t, s)
}

// testReplayCancelPinning: a batch can be cancelled while it is pinning.
// The pin stops at its next chunk (CreateReplay answers ECONFLICT), the
// batch stays cancelled with the items written before the cancel, every
// one skipped, its counts consistent with them, and one replay.cancel
// event from pinning; no replay.create, and no message moved.
func testReplayCancelPinning(t *testing.T, h Harness) {
	s, all, r := bulkReplay(t, h)
	ctx := t.Context()
	n := len(all)
	r.DryRun = true
	var id string
	r.OnPinning = func(b *quarantine.ReplayBatch) {
		id = b.ID
		_, err := s.ChangeReplay(ctx, quarantine.ReplayChange{BatchID: b.ID, Action: quarantine.ReplayActCancel, Actor: "bob", Reason: "wrong filter"})
		wantOK(t, err, "cancel a pinning batch")
	}
	_, err := s.CreateReplay(ctx, r, nil)
	wantCode(t, err, quarantine.ECONFLICT)
	if id == "" {
		t.Fatal("the selection was not pinned in chunks")
	}
	got, err := s.GetReplay(ctx, id)
	wantOK(t, err, "GetReplay")
	its := itemsPaged(t, s, id, quarantine.MaxLimit)
	if got.State != quarantine.ReplayCancelled || got.Total != len(its) || got.Total >= n || got.PinTotal != n ||
		got.Counts[quarantine.ItemSkipped] != got.Total || got.Counts[quarantine.ItemPending] != 0 {
		t.Fatalf("cancelled while pinning: state %s total %d of %d, counts %v, %d items", got.State, got.Total, got.PinTotal, got.Counts, len(its))
	}
	for _, it := range its {
		if it.Outcome != quarantine.ItemSkipped || it.Reason != "cancelled" {
			t.Fatalf("item %d of a cancelled pin: %s %q", it.Seq, it.Outcome, it.Reason)
		}
	}
	evs := auditOf(t, s, id, quarantine.ActionReplayCancel)
	if len(evs) != 1 || !contains(string(evs[0].Details), string(quarantine.ReplayPinning)) {
		t.Fatalf("replay.cancel events %+v, want one from pinning", evs)
	}
	if evs := auditOf(t, s, id, quarantine.ActionReplayCreate); len(evs) != 0 {
		t.Fatalf("%d replay.create events for a pin cancelled before it settled", len(evs))
	}
	// A cancelled batch is not an abandoned pin: it stays.
	runnable, err := s.RunnableReplays(ctx, time.Now().Add(2*replays.PinStale))
	wantOK(t, err, "RunnableReplays")
	if _, err := s.GetReplay(ctx, id); err != nil || len(runnable) != 0 {
		t.Fatalf("after the abandoned pins were removed: %v, runnable %d", err, len(runnable))
	}
	counts, err := s.CountByQueue(ctx, quarantine.Filter{Queue: []string{"bulk"}, Status: []quarantine.Status{quarantine.StatusQuarantined}})
	wantOK(t, err, "CountByQueue")
	if len(counts) != 1 || counts[0].Count != int64(n) {
		t.Fatalf("quarantined counts %+v, want %d", counts, n)
	}
	wantChain(t, s)
}

package storetest

import (
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
)

func testReplayGuards(t *testing.T, h Harness) {
	runParallel(t, h, []subtest{
		{"IncidentGuard", testReplayIncidentGuard},
		{"ReplayCap", testReplayCap},
		{"CountReplays", testCountReplays},
	})
}

func testCountReplays(t *testing.T, h Harness) {
	s := h.Open(t)
	a, b := newMsg(), newMsg()
	insert(t, s, a, b)
	d := replayReq(a.ID)
	d.DryRun = true
	createReplay(t, s, d, nil)
	createReplay(t, s, replayReq(b.ID), nil)
	c := replayReq(a.ID)
	c.DryRun = true
	cancelled := createReplay(t, s, c, nil)
	_, err := change(t, s, cancelled.ID, quarantine.ReplayActCancel)
	wantOK(t, err, "cancel")
	got, err := s.CountReplays(t.Context())
	wantOK(t, err, "CountReplays")
	want := map[quarantine.ReplayState]int{quarantine.ReplayDraft: 1, quarantine.ReplayRunning: 1, quarantine.ReplayCancelled: 1}
	for _, st := range quarantine.ReplayStates {
		n, ok := got[st]
		if !ok || n != want[st] {
			t.Errorf("%s: %d (present %v), want %d", st, n, ok, want[st])
		}
	}
}

func withCollectedAt(at time.Time) msgOpt { return func(m *quarantine.Message) { m.CollectedAt = at } }

// The incident guard counts the new dead letters of the batch's queues
// in its window, the batch's own messages not counted, both at creation
// and at the start of a draft; force and a batch no larger than its
// canary pass.
func testReplayIncidentGuard(t *testing.T, h Harness) {
	s, clock := openClock(t, h)
	now := clock.Now()
	guard := &quarantine.IncidentGuard{Window: 5 * time.Minute, PerMinute: 1}
	var mine []*quarantine.Message
	for range 4 {
		mine = append(mine, newMsg(withQueue("guarded"), withCollectedAt(now.Add(-time.Minute))))
	}
	insert(t, s, mine...)
	old := newMsg(withQueue("guarded"), withCollectedAt(now.Add(-time.Hour))) // before the window
	other := newMsg(withQueue("elsewhere"), withCollectedAt(now.Add(-time.Minute)))
	insert(t, s, old, other)
	r := replayReq(ids(mine)...)
	r.Guard = guard
	// Only the batch's own messages arrived recently: it starts.
	b := createReplay(t, s, r, nil)
	if b.State != quarantine.ReplayRunning {
		t.Fatalf("state %s", b.State)
	}
	_, err := change(t, s, b.ID, quarantine.ReplayActCancel)
	wantOK(t, err, "cancel")

	// Six more in five minutes (above 1 a minute): refused, nothing made.
	var incoming []*quarantine.Message
	for range 6 {
		incoming = append(incoming, newMsg(withQueue("guarded"), withCollectedAt(now.Add(-2*time.Minute))))
	}
	insert(t, s, incoming...)
	before, _, err := s.ListReplays(t.Context(), quarantine.ReplayFilter{})
	wantOK(t, err, "ListReplays")
	_, err = s.CreateReplay(t.Context(), r, nil)
	wantCode(t, err, quarantine.ECONFLICT)
	if quarantine.ErrorField(err) != "force" {
		t.Fatalf("field %q, want force", quarantine.ErrorField(err))
	}
	after, _, err := s.ListReplays(t.Context(), quarantine.ReplayFilter{})
	wantOK(t, err, "ListReplays")
	if len(after) != len(before) {
		t.Fatalf("a refused replay was created: %d batches, then %d", len(before), len(after))
	}
	wantStatuses(t, s, mine) // still quarantined

	// No larger than its canary: allowed.
	small := r
	small.Canary = len(mine)
	b = createReplay(t, s, small, nil)
	_, err = change(t, s, b.ID, quarantine.ReplayActCancel)
	wantOK(t, err, "cancel")

	// A draft is not guarded; its start is, and force overrides.
	d := r
	d.DryRun = true
	draft := createReplay(t, s, d, nil)
	_, err = s.ChangeReplay(t.Context(), quarantine.ReplayChange{BatchID: draft.ID, Action: quarantine.ReplayActStart,
		Actor: "alice", Reason: "go", Guard: guard})
	wantCode(t, err, quarantine.ECONFLICT)
	got, err := s.GetReplay(t.Context(), draft.ID)
	wantOK(t, err, "GetReplay")
	if got.State != quarantine.ReplayDraft {
		t.Fatalf("a refused start left the draft %s", got.State)
	}
	started, err := s.ChangeReplay(t.Context(), quarantine.ReplayChange{BatchID: draft.ID, Action: quarantine.ReplayActStart,
		Actor: "alice", Reason: "dependency is back, inflow is other tenants", Guard: guard, Force: true})
	wantOK(t, err, "forced start")
	if started.State != quarantine.ReplayRunning {
		t.Fatalf("state %s", started.State)
	}
	if len(auditOf(t, s, draft.ID, quarantine.ActionReplayForce)) != 1 {
		t.Fatal("the forced start is not in the audit log as replay.force")
	}
	wantChain(t, s)
}

// A job that came back after its replays carries their count; at the
// cap only an admin replays it.
func testReplayCap(t *testing.T, h Harness) {
	s := h.Open(t)
	ctx := t.Context()
	m := newMsg(withIdem("cap-key"))
	insert(t, s, m)
	for round := 1; round <= 2; round++ {
		b := createReplay(t, s, replayReq(m.ID), nil)
		ls, err := s.LeaseReplayItems(ctx, b.ID, "engine", 1, time.Hour, 0)
		wantOK(t, err, "LeaseReplayItems")
		_, err = s.RecordReplayResults(ctx, []quarantine.ReplayResult{published(ls[0])})
		wantOK(t, err, "RecordReplayResults")
		again := newMsg(withIdem("cap-key"))
		insert(t, s, again)
		got, err := s.GetMessage(ctx, again.ID)
		wantOK(t, err, "GetMessage")
		if got.ReplayCount != round || got.RefailOf != m.ID {
			t.Fatalf("round %d: the new entry has replay_count %d, refail_of %q; want %d, %s", round, got.ReplayCount, got.RefailOf, round, m.ID)
		}
		m = again
	}
	r := replayReq(m.ID)
	r.MaxReplays = 2
	b := createReplay(t, s, r, nil)
	wantItem(t, items(t, s, b.ID), m.ID, quarantine.ItemSkipped,
		"this job was replayed 2 times and came back failing each time: only an admin may replay it again")
	r.Admin = true
	b = createReplay(t, s, r, nil)
	wantItem(t, items(t, s, b.ID), m.ID, quarantine.ItemPending, "")
	wantChain(t, s)
}

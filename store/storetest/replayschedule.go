package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
)

func testReplaySchedule(t *testing.T, h Harness) {
	runParallel(t, h, []subtest{
		{"StartsWhenDue", testReplayScheduleStarts},
		{"CancelBeforeStart", testReplayScheduleCancel},
		{"GuardAtStart", testReplayScheduleGuard},
		{"Refused", testReplayScheduleRefused},
	})
}

// scheduledReq returns a request by alice for msgs, scheduled at at.
func scheduledReq(at time.Time, msgs ...*quarantine.Message) quarantine.ReplayRequest {
	r := replayReq(ids(msgs)...)
	r.StartAt = &at
	return r
}

// A scheduled batch is pinned and changes nothing until it is due; then
// it is runnable, and one start (of two tried) moves it to running,
// audited once, as a draft's start does.
func testReplayScheduleStarts(t *testing.T, h Harness) {
	s, clock := openClock(t, h)
	msgs := []*quarantine.Message{newMsg(withQueue("night")), newMsg(withQueue("night"))}
	insert(t, s, msgs...)
	at := clock.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
	b := createReplay(t, s, scheduledReq(at, msgs...), nil)
	if b.State != quarantine.ReplayScheduled || b.StartAt == nil || !b.StartAt.Equal(at) || b.StartedAt != nil ||
		b.ExpiresAt != nil || b.Counts[quarantine.ItemPending] != 2 {
		t.Fatalf("scheduled batch = %+v", b)
	}
	got, err := s.GetReplay(t.Context(), b.ID)
	wantOK(t, err, "GetReplay")
	if got.State != quarantine.ReplayScheduled || got.StartAt == nil || !got.StartAt.Equal(at) {
		t.Fatalf("read back = %+v", got)
	}
	wantStatuses(t, s, msgs) // nothing moves before the start
	evs := auditOf(t, s, b.ID, quarantine.ActionReplayCreate)
	var d struct {
		DryRun  bool       `json:"dry_run"`
		StartAt *time.Time `json:"start_at"`
	}
	if len(evs) != 1 || json.Unmarshal(evs[0].Details, &d) != nil || d.StartAt == nil || !d.StartAt.Equal(at) || d.DryRun {
		t.Fatalf("create events %v", evs)
	}
	if n := len(auditOf(t, s, b.ID, quarantine.ActionReplayStart)); n != 0 {
		t.Fatalf("a scheduled batch was audited as started %d times at creation", n)
	}
	ls, err := s.LeaseReplayItems(t.Context(), b.ID, "engine", 10, time.Minute, 0)
	wantOK(t, err, "LeaseReplayItems")
	if len(ls) != 0 {
		t.Fatalf("a scheduled batch leased %d items before its start", len(ls))
	}
	runnable := func() bool {
		t.Helper()
		run, err := s.RunnableReplays(t.Context(), clock.Now())
		wantOK(t, err, "RunnableReplays")
		for _, r := range run {
			if r.ID == b.ID {
				return true
			}
		}
		return false
	}
	if runnable() {
		t.Fatal("a scheduled batch is runnable before its time")
	}
	clock.Advance(time.Hour - time.Microsecond)
	if runnable() {
		t.Fatal("a scheduled batch is runnable a microsecond before its time")
	}
	clock.Advance(time.Microsecond)
	if !runnable() {
		t.Fatal("a scheduled batch is not runnable at its time")
	}
	start := quarantine.ReplayChange{BatchID: b.ID, Action: quarantine.ReplayActStart, Actor: "system:replay", Reason: "scheduled start"}
	started, err := s.ChangeReplay(t.Context(), start)
	wantOK(t, err, "start")
	if started.State != quarantine.ReplayRunning || started.StartedAt == nil || started.StartAt == nil || !started.StartAt.Equal(at) {
		t.Fatalf("started = %+v", started)
	}
	_, err = s.ChangeReplay(t.Context(), start) // another engine, a moment later
	wantCode(t, err, quarantine.ECONFLICT)
	if evs := auditOf(t, s, b.ID, quarantine.ActionReplayStart); len(evs) != 1 || evs[0].Actor != "system:replay" {
		t.Fatalf("start events %v", evs)
	}
	wantStatuses(t, s, msgs) // a start moves nothing: a lease does
	ls, err = s.LeaseReplayItems(t.Context(), b.ID, "engine", 10, time.Minute, 0)
	wantOK(t, err, "LeaseReplayItems")
	if len(ls) != len(msgs) {
		t.Fatalf("the started batch leased %d items, want %d", len(ls), len(msgs))
	}
	wantStatuses(t, s, msgs) // nor does a lease: the record of the outcome does
	wantChain(t, s)
}

// A scheduled batch cancelled before its start is never runnable again,
// and its messages stay quarantined, as do those another running batch
// holds (its items do, in flight).
func testReplayScheduleCancel(t *testing.T, h Harness) {
	s, clock := openClock(t, h)
	a, other := newMsg(), newMsg()
	insert(t, s, a, other)
	b := createReplay(t, s, scheduledReq(clock.Now().Add(time.Minute), a, other), nil)
	running := createReplay(t, s, replayReq(other.ID), nil) // other is being replayed now, by another batch
	if running.State != quarantine.ReplayRunning {
		t.Fatalf("running = %+v", running)
	}
	if ls, err := s.LeaseReplayItems(t.Context(), running.ID, "engine", 10, time.Minute, 0); err != nil || len(ls) != 1 {
		t.Fatalf("LeaseReplayItems of the running batch = %d, %v", len(ls), err)
	}
	cancelled, err := change(t, s, b.ID, quarantine.ReplayActCancel)
	wantOK(t, err, "cancel")
	if cancelled.State != quarantine.ReplayCancelled || cancelled.FinishedAt == nil || cancelled.Counts[quarantine.ItemPending] != 0 {
		t.Fatalf("cancelled = %+v", cancelled)
	}
	wantStatuses(t, s, []*quarantine.Message{a, other})
	clock.Advance(2 * time.Minute)
	run, err := s.RunnableReplays(t.Context(), clock.Now())
	wantOK(t, err, "RunnableReplays")
	for _, r := range run {
		if r.ID == b.ID {
			t.Fatal("a cancelled scheduled batch is runnable")
		}
	}
	_, err = change(t, s, b.ID, quarantine.ReplayActStart)
	wantCode(t, err, quarantine.ECONFLICT)
	if evs := auditOf(t, s, b.ID, quarantine.ActionReplayCancel); len(evs) != 1 {
		t.Fatalf("cancel events %v", evs)
	}
	wantChain(t, s)
}

// The incident guard is not checked when a batch is scheduled, only when
// it starts: refused then (the batch stays scheduled), unless the
// request that scheduled it gave force.
func testReplayScheduleGuard(t *testing.T, h Harness) {
	s, clock := openClock(t, h)
	now := clock.Now()
	guard := &quarantine.IncidentGuard{Window: 5 * time.Minute, PerMinute: 1}
	mine := []*quarantine.Message{newMsg(withQueue("storm")), newMsg(withQueue("storm"))}
	insert(t, s, mine...)
	var incoming []*quarantine.Message
	for range 10 {
		incoming = append(incoming, newMsg(withQueue("storm"), withCollectedAt(now.Add(-time.Minute))))
	}
	insert(t, s, incoming...)
	r := scheduledReq(now.Add(time.Minute), mine...)
	r.Guard = guard
	b := createReplay(t, s, r, nil) // scheduled in the storm: fine, nothing starts
	forced := r
	forced.Force, forced.Reason = true, "the inflow is another tenant's"
	f := createReplay(t, s, forced, nil)
	if b.State != quarantine.ReplayScheduled || f.State != quarantine.ReplayScheduled || !f.StartForce || b.StartForce {
		t.Fatalf("scheduled %+v and %+v", b, f)
	}
	if evs := auditOf(t, s, f.ID, quarantine.ActionReplayForce); len(evs) != 1 {
		t.Fatalf("the forced schedule has %d replay.force events, want 1", len(evs))
	}
	clock.Advance(time.Minute)
	for _, c := range []struct {
		b    *quarantine.ReplayBatch
		code string
	}{{b, quarantine.ECONFLICT}, {f, ""}} {
		got, err := s.GetReplay(t.Context(), c.b.ID)
		wantOK(t, err, "GetReplay")
		_, err = s.ChangeReplay(t.Context(), quarantine.ReplayChange{BatchID: c.b.ID, Action: quarantine.ReplayActStart,
			Actor: "system:replay", Reason: "scheduled start", Guard: guard, Force: got.StartForce})
		wantCode(t, err, c.code)
		if c.code != "" && quarantine.ErrorField(err) != "force" {
			t.Fatalf("field %q, want force", quarantine.ErrorField(err))
		}
	}
	for id, want := range map[string]quarantine.ReplayState{b.ID: quarantine.ReplayScheduled, f.ID: quarantine.ReplayRunning} {
		got, err := s.GetReplay(t.Context(), id)
		wantOK(t, err, "GetReplay")
		if got.State != want {
			t.Fatalf("batch %s is %s, want %s", id, got.State, want)
		}
	}
	wantChain(t, s)
}

// A start time not in the future, too far ahead, or with a dry run, is
// refused and nothing is made.
func testReplayScheduleRefused(t *testing.T, h Harness) {
	s, clock := openClock(t, h)
	m := newMsg()
	insert(t, s, m)
	for _, c := range []struct {
		name string
		at   time.Time
		dry  bool
		code string
	}{
		{"now", clock.Now(), false, quarantine.EUNPROCESSABLE},
		{"past", clock.Now().Add(-time.Hour), false, quarantine.EUNPROCESSABLE},
		{"too far", clock.Now().Add(quarantine.MaxReplayDelay + time.Minute), false, quarantine.EUNPROCESSABLE},
		{"dry run", clock.Now().Add(time.Hour), true, quarantine.EINVALID},
	} {
		r := scheduledReq(c.at, m)
		r.DryRun = c.dry
		var err error
		if err = r.Validate(0); err == nil {
			_, err = s.CreateReplay(t.Context(), r, nil)
		}
		if quarantine.ErrorCode(err) != c.code {
			t.Fatalf("%s: error code %q, want %q (err: %v)", c.name, quarantine.ErrorCode(err), c.code, err)
		}
		if quarantine.ErrorField(err) != "start_at" {
			t.Fatalf("%s: field %q, want start_at", c.name, quarantine.ErrorField(err))
		}
	}
	list, _, err := s.ListReplays(t.Context(), quarantine.ReplayFilter{Limit: 10})
	wantOK(t, err, "ListReplays")
	if len(list) != 0 {
		t.Fatalf("refused schedules made %d batches", len(list))
	}
	wantStatuses(t, s, []*quarantine.Message{m})
}

package storetest

import (
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
)

func testAlarms(t *testing.T, h Harness) {
	runParallel(t, h, []subtest{
		{"States", testAlarmStates},
		{"Atomic", testAlarmAtomic},
		{"Outbox", testAlarmOutbox},
		{"Lock", testAlarmLock},
	})
}

// alarmState returns a firing state of alarm on queue since at.
func alarmState(alarm, queue string, st quarantine.AlarmStatus, at time.Time) quarantine.AlarmState {
	return quarantine.AlarmState{Alarm: alarm, Queue: queue, Owner: "payments", State: st, Since: at,
		ActiveAt: &at, AlarmReading: quarantine.AlarmReading{Reason: "oldest 20m0s > 15m0s", AgeSeconds: 1200, Depth: 3, InflowPerMinute: 0.5}}
}

func alarmNote(receiver string, kind quarantine.AlarmKind, at time.Time) quarantine.AlarmNotification {
	return quarantine.AlarmNotification{Receiver: receiver, Kind: kind, Event: quarantine.AlarmEvent{
		Alarm: "age", Queue: "orders", Owner: "payments", Status: quarantine.AlarmFiring, StartsAt: at,
		AlarmReading: quarantine.AlarmReading{Reason: "oldest 20m0s > 15m0s", AgeSeconds: 1200, Depth: 3}, At: at}}
}

// States: saved states come back as saved, by alarm and queue; a second
// save of the same alarm and queue replaces the row.
func testAlarmStates(t *testing.T, h Harness) {
	s, clock := openClock(t, h)
	ctx := t.Context()
	at := clock.Now().Add(-time.Minute).UTC().Truncate(time.Microsecond)
	got, err := s.AlarmStates(ctx)
	wantOK(t, err, "AlarmStates")
	if len(got) != 0 {
		t.Fatalf("a new store has alarm states %v", got)
	}
	b := alarmState("b", "orders", quarantine.AlarmPending, at)
	a2 := alarmState("a", "z.queue", quarantine.AlarmFiring, at)
	a1 := alarmState("a", "billing", quarantine.AlarmInactive, at)
	a1.ActiveAt = nil
	wantOK(t, s.SaveAlarms(ctx, []quarantine.AlarmState{b, a2, a1}, nil), "SaveAlarms")
	got, err = s.AlarmStates(ctx)
	wantOK(t, err, "AlarmStates")
	want := []quarantine.AlarmState{a1, a2, b}
	if len(got) != len(want) {
		t.Fatalf("AlarmStates = %d rows, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Alarm != w.Alarm || g.Queue != w.Queue || g.State != w.State || !g.Since.Equal(w.Since) || g.Owner != w.Owner ||
			g.Reason != w.Reason || g.AgeSeconds != w.AgeSeconds || g.Depth != w.Depth || g.InflowPerMinute != w.InflowPerMinute ||
			(g.ActiveAt == nil) != (w.ActiveAt == nil) || g.NotifiedAt != nil || !g.UpdatedAt.Equal(clock.Now().UTC().Truncate(time.Microsecond)) {
			t.Fatalf("AlarmStates[%d] = %+v, want %+v (updated at the store's clock)", i, g, w)
		}
	}
	// Firing, then resolved: the row is replaced.
	clock.Advance(time.Minute)
	n := clock.Now().UTC().Truncate(time.Microsecond)
	a2.State, a2.Since, a2.NotifiedAt, a2.ActiveAt = quarantine.AlarmResolved, n, &n, nil
	wantOK(t, s.SaveAlarms(ctx, []quarantine.AlarmState{a2}, nil), "SaveAlarms again")
	got, err = s.AlarmStates(ctx)
	wantOK(t, err, "AlarmStates")
	if len(got) != 3 || got[1].State != quarantine.AlarmResolved || !got[1].Since.Equal(n) || got[1].ActiveAt != nil ||
		got[1].NotifiedAt == nil || !got[1].NotifiedAt.Equal(n) {
		t.Fatalf("after the update AlarmStates = %+v, want a/z.queue resolved since %s", got, n)
	}
}

// Atomic: a save with one bad state keeps neither the states nor the
// notifications of the call.
func testAlarmAtomic(t *testing.T, h Harness) {
	s, clock := openClock(t, h)
	ctx := t.Context()
	at := clock.Now()
	good := alarmState("age", "orders", quarantine.AlarmFiring, at)
	bad := alarmState("age", "billing", "exploded", at)
	err := s.SaveAlarms(ctx, []quarantine.AlarmState{good, bad}, []quarantine.AlarmNotification{alarmNote("hook", quarantine.AlarmKindFiring, at)})
	wantCode(t, err, quarantine.EINVALID)
	err = s.SaveAlarms(ctx, []quarantine.AlarmState{good}, []quarantine.AlarmNotification{alarmNote("hook", "shout", at)})
	wantCode(t, err, quarantine.EINVALID)
	states, err := s.AlarmStates(ctx)
	wantOK(t, err, "AlarmStates")
	notes, err := s.PendingAlarmNotifications(ctx, 10)
	wantOK(t, err, "PendingAlarmNotifications")
	if len(states) != 0 || len(notes) != 0 {
		t.Fatalf("a refused save kept %d states and %d notifications", len(states), len(notes))
	}
}

// Outbox: notifications stay pending, in order, until delivered or given
// up; a failed attempt keeps the error and the next attempt time.
func testAlarmOutbox(t *testing.T, h Harness) {
	s, clock := openClock(t, h)
	ctx := t.Context()
	at := clock.Now().UTC().Truncate(time.Microsecond)
	st := alarmState("age", "orders", quarantine.AlarmFiring, at)
	later := at.Add(time.Hour)
	n2 := alarmNote("slack", quarantine.AlarmKindFiring, at)
	n2.NextAttemptAt = later
	wantOK(t, s.SaveAlarms(ctx, []quarantine.AlarmState{st}, []quarantine.AlarmNotification{
		alarmNote("hook", quarantine.AlarmKindFiring, at), n2, alarmNote("am", quarantine.AlarmKindRefresh, at)}), "SaveAlarms")
	notes, err := s.PendingAlarmNotifications(ctx, 10)
	wantOK(t, err, "PendingAlarmNotifications")
	if len(notes) != 3 || notes[0].Receiver != "hook" || notes[1].Receiver != "slack" || notes[2].Receiver != "am" ||
		notes[0].ID >= notes[1].ID || notes[1].ID >= notes[2].ID {
		t.Fatalf("pending = %+v, want hook, slack, am by increasing id", notes)
	}
	h0 := notes[0]
	if h0.Delivery != quarantine.AlarmDeliveryPending || h0.Attempts != 0 || !h0.NextAttemptAt.Equal(at) || !h0.CreatedAt.Equal(at) ||
		h0.Kind != quarantine.AlarmKindFiring || h0.Event.Queue != "orders" || h0.Event.Status != quarantine.AlarmFiring ||
		!h0.Event.StartsAt.Equal(at) || h0.Event.AgeSeconds != 1200 || h0.Event.Depth != 3 {
		t.Fatalf("first note = %+v, want a pending firing note due now with its event", h0)
	}
	if !notes[1].NextAttemptAt.Equal(later) {
		t.Fatalf("slack's next attempt = %s, want %s", notes[1].NextAttemptAt, later)
	}
	first, err := s.PendingAlarmNotifications(ctx, 1)
	wantOK(t, err, "PendingAlarmNotifications(1)")
	if len(first) != 1 || first[0].ID != h0.ID {
		t.Fatalf("limit 1 = %+v, want the first only", first)
	}

	// hook fails, then is delivered; am is refused for good.
	retry := at.Add(2 * time.Second)
	wantOK(t, s.RecordAlarmDelivery(ctx, h0.ID, quarantine.AlarmAttempt{Err: "503 Service Unavailable", Next: retry}), "record failure")
	notes, err = s.PendingAlarmNotifications(ctx, 10)
	wantOK(t, err, "PendingAlarmNotifications")
	if len(notes) != 3 || notes[0].Attempts != 1 || notes[0].LastError != "503 Service Unavailable" || !notes[0].NextAttemptAt.Equal(retry) {
		t.Fatalf("after a failure, hook = %+v, want attempts 1, the error and next attempt %s", notes[0], retry)
	}
	wantOK(t, s.RecordAlarmDelivery(ctx, h0.ID, quarantine.AlarmAttempt{Delivered: true}), "record delivery")
	wantOK(t, s.RecordAlarmDelivery(ctx, notes[2].ID, quarantine.AlarmAttempt{Err: "400 Bad Request", GiveUp: true}), "record give up")
	wantCode(t, s.RecordAlarmDelivery(ctx, h0.ID, quarantine.AlarmAttempt{Delivered: true}), quarantine.ECONFLICT)
	wantCode(t, s.RecordAlarmDelivery(ctx, notes[2].ID+1000, quarantine.AlarmAttempt{Delivered: true}), quarantine.ENOTFOUND)
	notes, err = s.PendingAlarmNotifications(ctx, 10)
	wantOK(t, err, "PendingAlarmNotifications")
	if len(notes) != 1 || notes[0].Receiver != "slack" {
		t.Fatalf("pending after delivery and give-up = %+v, want slack only", notes)
	}

	// The purge deletes the delivered and the failed one, not the pending.
	n, err := s.PurgeAlarmNotifications(ctx, at)
	wantOK(t, err, "PurgeAlarmNotifications")
	if n != 0 {
		t.Fatalf("a purge before they were queued deleted %d", n)
	}
	n, err = s.PurgeAlarmNotifications(ctx, at.Add(time.Second))
	wantOK(t, err, "PurgeAlarmNotifications")
	notes, err = s.PendingAlarmNotifications(ctx, 10)
	wantOK(t, err, "PendingAlarmNotifications")
	if n != 2 || len(notes) != 1 || notes[0].Receiver != "slack" {
		t.Fatalf("purge deleted %d, pending %+v; want 2 deleted and slack still pending", n, notes)
	}
	wantCode(t, s.RecordAlarmDelivery(ctx, h0.ID, quarantine.AlarmAttempt{Delivered: true}), quarantine.ENOTFOUND)
}

// Lock: one holder at a time; released, it can be taken again.
func testAlarmLock(t *testing.T, h Harness) {
	s := h.Open(t)
	ctx := t.Context()
	l1, err := s.LockAlarms(ctx)
	wantOK(t, err, "LockAlarms")
	wantOK(t, l1.Check(ctx), "Check while held")
	_, err = s.LockAlarms(ctx)
	wantCode(t, err, quarantine.ECONFLICT)
	l1.Release()
	l1.Release() // twice does nothing
	wantCode(t, l1.Check(ctx), quarantine.EUNAVAILABLE)
	l2, err := s.LockAlarms(ctx)
	wantOK(t, err, "LockAlarms after release")
	defer l2.Release()
	wantOK(t, l2.Check(ctx), "Check the second holder")
	// Another store of another schema (or file) does not contend.
	other := h.Open(t)
	l3, err := other.LockAlarms(ctx)
	wantOK(t, err, "LockAlarms of another store")
	l3.Release()
}

package replay_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/replay"
)

// A scheduled batch waits for its time; then one of two engines starts
// it (one replay.start, by the engine), and nothing arrives before.
func TestReplayScheduledStartsOnceWhenDue(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ids := f.insert(6)
	at := time.Now().Add(1500 * time.Millisecond)
	b := f.create(ids, quarantine.ReplayRequest{Rate: 100, Burst: 10, StartAt: &at})
	if b.State != quarantine.ReplayScheduled {
		t.Fatalf("created %s, want scheduled", b.State)
	}
	f.engine(replay.Config{})
	f.engine(replay.Config{})
	done := f.waitState(b.ID, 30*time.Second, quarantine.ReplayCompleted)
	got := f.broker.Messages("orders")
	if len(got) != 6 || done.Counts[quarantine.ItemPublished] != 6 {
		t.Fatalf("%d published, counts %v", len(got), done.Counts)
	}
	for _, m := range got {
		if m.At.Before(at) {
			t.Errorf("a message arrived %s before the scheduled start", at.Sub(m.At))
		}
	}
	if done.StartedAt == nil || done.StartedAt.Before(at.Truncate(time.Microsecond)) {
		t.Errorf("started at %v, scheduled at %s", done.StartedAt, at)
	}
	evs, err := f.store.ListAudit(context.Background(), quarantine.AuditFilter{Subject: b.ID, Action: quarantine.ActionReplayStart, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Actor != replay.SystemActor {
		t.Fatalf("start events %+v, want one by %s", evs, replay.SystemActor)
	}
	f.verifyAudit()
}

// The incident guard is checked when a scheduled batch starts: a storm
// of new dead letters in its queue since it was scheduled cancels it,
// with the guard's reason, and nothing is published.
func TestReplayScheduledStartRefusedByTheGuard(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ids := f.insert(3)
	at := time.Now().Add(500 * time.Millisecond)
	b := f.create(ids, quarantine.ReplayRequest{Rate: 100, StartAt: &at})
	f.insert(20) // the incident goes on: 20 new dead letters in orders
	f.engine(replay.Config{Guard: &quarantine.IncidentGuard{Window: 5 * time.Minute, PerMinute: 1}})
	got := f.waitState(b.ID, 30*time.Second, quarantine.ReplayCancelled, quarantine.ReplayRunning, quarantine.ReplayCompleted)
	if got.State != quarantine.ReplayCancelled || !strings.Contains(got.StateReason, "incident guard") {
		t.Fatalf("batch %s (%q), want cancelled by the incident guard", got.State, got.StateReason)
	}
	if n := len(f.broker.Messages("orders")); n != 0 {
		t.Fatalf("%d messages published", n)
	}
	f.verifyAudit()
}

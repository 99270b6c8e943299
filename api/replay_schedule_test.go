package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// A replay created with start_at is scheduled: shown with its start time,
// nothing moves, audited with start_at; it can be cancelled before it
// starts. Bad times are refused naming /start_at.
func TestReplayScheduled(t *testing.T) {
	t.Parallel()
	e := newReplayEnv(t)
	ids := []string{e.ingestOne("billing", "charge", `1`), e.ingestOne("billing", "charge", `2`)}
	at := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
	c := e.createReplay(e.operator, map[string]any{"ids": ids, "reason": "night window", "start_at": at.Format(time.RFC3339)})
	b := c.Replay
	if b.State != quarantine.ReplayScheduled || b.StartAt == nil || !b.StartAt.Equal(at) || b.StartedAt != nil || b.ExpiresAt != nil {
		t.Fatalf("created %+v", b)
	}
	if got := e.replay(b.ID, e.viewer); got.State != quarantine.ReplayScheduled || got.StartAt == nil || !got.StartAt.Equal(at) {
		t.Fatalf("read back %+v", got)
	}
	for _, m := range ids {
		if st := e.message(m, e.viewer).Status; st != quarantine.StatusQuarantined {
			t.Fatalf("scheduled: %s is %s", m, st)
		}
	}
	ev := e.auditOf(b.ID, quarantine.ActionReplayCreate)
	if len(ev) != 1 || detailsOf(t, ev[0])["start_at"] != at.Format(time.RFC3339) {
		t.Fatalf("create audit %+v", ev)
	}
	cancelled := e.act(b.ID, "cancel", e.operator, "not tonight", http.StatusOK)
	if cancelled.State != quarantine.ReplayCancelled || cancelled.StateReason != "not tonight" {
		t.Fatalf("cancelled %+v", cancelled)
	}
	if ev := e.auditOf(b.ID, quarantine.ActionReplayCancel); len(ev) != 1 || ev[0].Actor != "token:operator" {
		t.Fatalf("cancel audit %+v", ev)
	}
	for _, m := range ids {
		if st := e.message(m, e.viewer).Status; st != quarantine.StatusQuarantined {
			t.Fatalf("cancelled: %s is %s", m, st)
		}
	}
	body := func(extra string) []byte {
		return []byte(`{"ids":["` + ids[0] + `"],"reason":"r",` + extra + `}`)
	}
	for _, tc := range []struct {
		extra  string
		status int
	}{
		{`"start_at":"tomorrow at 2"`, 400},
		{`"start_at":"2026-12-03 02:00"`, 400},
		{`"start_at":1764727200`, 400},
		{`"start_at":"` + time.Now().Add(-time.Minute).UTC().Format(time.RFC3339) + `"`, 422},
		{`"start_at":"` + time.Now().Add(quarantine.MaxReplayDelay+time.Hour).UTC().Format(time.RFC3339) + `"`, 422},
		{`"start_at":"` + at.Format(time.RFC3339) + `","dry_run":true`, 400},
	} {
		e.json(http.MethodPost, "/api/v1/replays", e.operator, body(tc.extra)).problem(t, tc.status, "/start_at")
	}
}

package storetest

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store"
)

// testDiscardOperation: a discard by filter in chunks discards exactly the
// set that matched when it started (not a message stored later), each
// message once, in the store's walk order, one audit event per change,
// whatever the chunk size, and leaves the failure groups exact; a count above the
// threshold needs expect_count, and a refused start records nothing.
func testDiscardOperation(t *testing.T, h Harness) {
	s, msgs, f, want := discardDataset(t, h)
	ctx := t.Context()
	d := quarantine.Discard{Filter: &f, Reason: "incident", Actor: "bob"}

	_, err := s.StartDiscard(ctx, d, len(want)-1)
	wantCode(t, err, quarantine.EUNPROCESSABLE)
	if e := quarantine.ErrorField(err); e != "expect_count" {
		t.Fatalf("a count above the threshold names %q, want expect_count", e)
	}
	stale := len(want) + 1
	d.ExpectCount = &stale
	_, err = s.StartDiscard(ctx, d, len(want)-1)
	wantCode(t, err, quarantine.ECONFLICT)
	_, err = s.StartDiscard(ctx, quarantine.Discard{IDs: []string{msgs[0].ID}, Reason: "x", Actor: "bob"}, 0)
	wantCode(t, err, quarantine.EINVALID)
	if running, err := s.RunningDiscards(ctx); err != nil || len(running) != 0 {
		t.Fatalf("RunningDiscards after refusals = %v, %v; want none", running, err)
	}

	n := len(want)
	d.ExpectCount = &n
	op, err := s.StartDiscard(ctx, d, len(want)-1)
	wantOK(t, err, "StartDiscard")
	if op.State != quarantine.DiscardRunning || op.Matched != int64(n) || op.Discarded != 0 || op.Actor != "bob" {
		t.Fatalf("StartDiscard = %+v, want running with %d matched", op, n)
	}
	// Stored after the start: matches the filter, is not in the set. It
	// joins the failure group of a quarantined message of the set, having
	// failed before it: once the set is discarded, the group's last
	// failure is an earlier one than before.
	i := slices.IndexFunc(msgs, func(m *quarantine.Message) bool {
		return m.Status == quarantine.StatusQuarantined && m.Queue == "orders" && slices.Contains(want, m.ID)
	})
	late := newMsg(withQueue("orders"), withOwner(msgs[i].Owner), withReason(msgs[i].Reason),
		withFailedAt(msgs[i].FailedAt.Add(-time.Hour)))
	late.JobName, late.FailureClass = msgs[i].JobName, msgs[i].FailureClass
	insert(t, s, late)
	if running, err := s.RunningDiscards(ctx); err != nil || len(running) != 1 || running[0].ID != op.ID {
		t.Fatalf("RunningDiscards = %v, %v; want %s", running, err, op.ID)
	}

	prev, _, skipped := expectDiscard(msgs, want)
	var changed, skippedGot []string
	for chunks := 0; op.State == quarantine.DiscardRunning; chunks++ {
		if chunks > n {
			t.Fatalf("%d chunks of 3 for %d messages: the operation does not end", chunks, n)
		}
		var res quarantine.BulkResult
		op, res, err = s.DiscardChunk(ctx, op.ID, 3)
		wantOK(t, err, "DiscardChunk")
		if len(res.Changed)+len(res.Skipped) > 3 {
			t.Fatalf("a chunk of 3 did %d", len(res.Changed)+len(res.Skipped))
		}
		changed = append(changed, res.Changed...)
		for _, sk := range res.Skipped {
			skippedGot = append(skippedGot, sk.ID)
		}
		if op.Discarded != int64(len(changed)) || op.Skipped != int64(len(skippedGot)) {
			t.Fatalf("operation counts %d/%d, chunks did %d/%d", op.Discarded, op.Skipped, len(changed), len(skippedGot))
		}
	}
	if op.State != quarantine.DiscardCompleted || op.FinishedAt == nil || op.Discarded != int64(len(prev)) || op.Skipped != int64(len(skipped)) {
		t.Fatalf("final operation %+v, want completed with %d discarded and %d skipped", op, len(prev), len(skipped))
	}
	for i, id := range changed {
		if slices.Contains(changed[:i], id) {
			t.Fatalf("message %s discarded by two chunks", id)
		}
	}
	wantStatuses(t, s, append(msgs, late))
	// The failure groups are exact once it is over, bounds and examples
	// included (a store may leave the bounds behind while it runs).
	for _, gf := range []quarantine.Filter{{}, {Status: []quarantine.Status{quarantine.StatusQuarantined}},
		{Status: []quarantine.Status{quarantine.StatusDiscarded}}, {Queue: []string{"orders"}}} {
		got, err := s.Groups(ctx, gf)
		wantOK(t, err, "Groups")
		if want := expectedGroups(gf, append(msgs, late)); !sameGroups(got, want) {
			t.Fatalf("Groups(%+v) after the operation =\n%+v\nwant\n%+v", gf, got, want)
		}
	}
	wantDiscardEvents(t, s, "incident", prev)

	got, err := s.GetDiscard(ctx, op.ID)
	wantOK(t, err, "GetDiscard")
	if got.State != quarantine.DiscardCompleted || got.Discarded != op.Discarded || got.Matched != int64(n) || !slices.Equal(got.Filter.Queue, f.Queue) {
		t.Fatalf("GetDiscard = %+v, want %+v", got, op)
	}
	// A finished operation stays as it is.
	again, res, err := s.DiscardChunk(ctx, op.ID, 3)
	if err != nil || again.State != quarantine.DiscardCompleted || len(res.Changed) != 0 {
		t.Fatalf("DiscardChunk of a completed operation = %+v %+v, %v", again, res, err)
	}
	wantOK(t, s.FailDiscard(ctx, op.ID, "late"), "FailDiscard of a completed operation")
	if got, _ := s.GetDiscard(ctx, op.ID); got.State != quarantine.DiscardCompleted {
		t.Fatalf("FailDiscard changed a completed operation: %+v", got)
	}
	_, err = s.GetDiscard(ctx, quarantine.NewID(baseTime))
	wantCode(t, err, quarantine.ENOTFOUND)
	_, _, err = s.DiscardChunk(ctx, quarantine.NewID(baseTime), 3)
	wantCode(t, err, quarantine.ENOTFOUND)
	wantCode(t, s.FailDiscard(ctx, quarantine.NewID(baseTime), "x"), quarantine.ENOTFOUND)
	testDiscardFail(t, s)
	testDiscardResume(t, s)
}

// testDiscardFail: a failed operation keeps its committed chunks and
// applies no other.
func testDiscardFail(t *testing.T, s store.Store) {
	ctx := t.Context()
	var msgs []*quarantine.Message
	for range 5 {
		msgs = append(msgs, newMsg(withQueue("fail-op")))
	}
	insert(t, s, msgs...)
	op, err := s.StartDiscard(ctx, quarantine.Discard{Filter: &quarantine.Filter{Queue: []string{"fail-op"}}, Reason: "r", Actor: "bob"}, 0)
	wantOK(t, err, "StartDiscard")
	op, _, err = s.DiscardChunk(ctx, op.ID, 2)
	wantOK(t, err, "DiscardChunk")
	wantOK(t, s.FailDiscard(ctx, op.ID, "broken"), "FailDiscard")
	op, res, err := s.DiscardChunk(ctx, op.ID, 2)
	if err != nil || op.State != quarantine.DiscardFailed || op.Error != "broken" || op.Discarded != 2 || len(res.Changed) != 0 {
		t.Fatalf("after FailDiscard: %+v %+v, %v", op, res, err)
	}
	counts, err := s.CountByQueue(ctx, quarantine.Filter{Queue: []string{"fail-op"}, Status: []quarantine.Status{quarantine.StatusDiscarded}})
	wantOK(t, err, "CountByQueue")
	if len(counts) != 1 || counts[0].Count != 2 {
		t.Fatalf("discarded after a failed operation: %v, want 2", counts)
	}
}

// testDiscardResume: a failed operation resumed runs again from its
// cursor and completes with every message of its set discarded once (one
// message.discard event each, none for the chunks already committed); a
// running one is returned as it is; each is recorded (discard.resume); a
// completed one is ECONFLICT, stays completed and is not recorded; an
// unknown one ENOTFOUND.
func testDiscardResume(t *testing.T, s store.Store) {
	ctx := t.Context()
	var msgs []*quarantine.Message
	for range 7 {
		msgs = append(msgs, newMsg(withQueue("resume-op")))
	}
	insert(t, s, msgs...)
	op, err := s.StartDiscard(ctx, quarantine.Discard{Filter: &quarantine.Filter{Queue: []string{"resume-op"}}, Reason: "resumed", Actor: "bob"}, 0)
	wantOK(t, err, "StartDiscard")
	running, err := s.ResumeDiscard(ctx, op.ID, "carol")
	if err != nil || running.State != quarantine.DiscardRunning || running.UpdatedAt != op.UpdatedAt || running.Discarded != 0 {
		t.Fatalf("ResumeDiscard of a running operation = %+v, %v; want it as it is (%+v)", running, err, op)
	}
	op, _, err = s.DiscardChunk(ctx, op.ID, 3)
	wantOK(t, err, "DiscardChunk")
	wantOK(t, s.FailDiscard(ctx, op.ID, "broken"), "FailDiscard")
	op, err = s.ResumeDiscard(ctx, op.ID, "carol")
	if err != nil || op.State != quarantine.DiscardRunning || op.Error != "" || op.FinishedAt != nil || op.Discarded != 3 {
		t.Fatalf("ResumeDiscard of a failed operation = %+v, %v; want running with its 3 discarded", op, err)
	}
	if got, err := s.GetDiscard(ctx, op.ID); err != nil || got.State != quarantine.DiscardRunning || got.Error != "" || got.FinishedAt != nil {
		t.Fatalf("GetDiscard after ResumeDiscard = %+v, %v; want running without error", got, err)
	}
	var changed []string
	for chunks := 0; op.State == quarantine.DiscardRunning; chunks++ {
		if chunks > len(msgs) {
			t.Fatalf("the resumed operation does not end: %+v", op)
		}
		var res quarantine.BulkResult
		op, res, err = s.DiscardChunk(ctx, op.ID, 3)
		wantOK(t, err, "DiscardChunk")
		changed = append(changed, res.Changed...)
	}
	if op.State != quarantine.DiscardCompleted || op.Discarded != int64(len(msgs)) || op.Skipped != 0 || len(changed) != len(msgs)-3 {
		t.Fatalf("resumed operation ended %+v after %d more changes; want completed with %d discarded", op, len(changed), len(msgs))
	}
	for _, m := range msgs {
		evs, err := s.ListAudit(ctx, quarantine.AuditFilter{Subject: m.ID, Action: quarantine.ActionDiscard})
		wantOK(t, err, "ListAudit")
		if len(evs) != 1 || !strings.Contains(string(evs[0].Details), `"resumed"`) {
			t.Fatalf("discard events of %s: %+v, want exactly one", m.ID, evs)
		}
	}
	// One discard.resume event per resume that was not refused: the
	// running one, then the failed one.
	evs, err := s.ListAudit(ctx, quarantine.AuditFilter{Subject: op.ID, Action: quarantine.ActionDiscardResume})
	wantOK(t, err, "ListAudit")
	if len(evs) != 2 || evs[0].Actor != "carol" || !strings.Contains(string(evs[0].Details), `"previous_state":"running"`) ||
		!strings.Contains(string(evs[1].Details), `"previous_state":"failed"`) || !strings.Contains(string(evs[1].Details), `"error":"broken"`) {
		t.Fatalf("discard.resume events %+v, want the running one's and the failed one's", evs)
	}
	if v, err := s.VerifyAudit(ctx); err != nil || !v.OK {
		t.Fatalf("VerifyAudit = %+v, %v", v, err)
	}
	_, err = s.ResumeDiscard(ctx, op.ID, "carol")
	wantCode(t, err, quarantine.ECONFLICT)
	if got, _ := s.GetDiscard(ctx, op.ID); got.State != quarantine.DiscardCompleted || got.FinishedAt == nil {
		t.Fatalf("ResumeDiscard changed a completed operation: %+v", got)
	}
	if evs, err := s.ListAudit(ctx, quarantine.AuditFilter{Subject: op.ID, Action: quarantine.ActionDiscardResume}); err != nil || len(evs) != 2 {
		t.Fatalf("a refused resume was recorded: %+v, %v", evs, err)
	}
	_, err = s.ResumeDiscard(ctx, quarantine.NewID(baseTime), "carol")
	wantCode(t, err, quarantine.ENOTFOUND)
}

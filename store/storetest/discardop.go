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
// message once, in the store's walk order, one audit event per chunk
// naming each change (wantChunkEvents), whatever the chunk size, and leaves the failure groups exact; a count above the
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
	changing := 0 // chunks that discarded something
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
		if len(res.Changed) > 0 {
			changing++
		}
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
	wantChunkEvents(t, s, op.ID, "incident", prev, changing)
	if evs, err := s.ListAudit(ctx, quarantine.AuditFilter{Subject: late.ID}); err != nil || len(evs) != 0 {
		t.Fatalf("events of a message outside the set: %+v, %v", evs, err)
	}

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

// wantChunkEvents checks the message.discard events of the discard
// operation opID (actor bob), the only ones in the log: chunks events,
// each naming its messages by previous status (prev) with their count and
// digest, together every message of prev once; and each message's
// history (AuditFilter.Subject) holds its chunk's event, with the action
// filter too. The chain verifies.
func wantChunkEvents(t *testing.T, s store.Store, opID, reason string, prev map[string]quarantine.Status, chunks int) {
	t.Helper()
	ctx := t.Context()
	evs, err := s.ListAudit(ctx, quarantine.AuditFilter{Action: quarantine.ActionDiscard, Limit: quarantine.MaxLimit})
	wantOK(t, err, "ListAudit")
	if len(evs) != chunks {
		t.Fatalf("%d discard events, want one per chunk that discarded (%d)", len(evs), chunks)
	}
	seqOf := map[string]int64{}
	for _, ev := range evs {
		d, ok := quarantine.ParseDiscardChunk(ev)
		if !ok || ev.Subject != opID || d.Reason != reason || ev.Actor != "bob" {
			t.Fatalf("discard event %s %s %s, want a chunk event of %s", ev.Subject, ev.Actor, ev.Details, opID)
		}
		wantOK(t, d.Check(), "the chunk event's count and digest")
		for st, ids := range d.PreviousStatus {
			if !slices.IsSorted(ids) {
				t.Fatalf("ids of %s not sorted: %v", st, ids)
			}
			for _, id := range ids {
				if want, ok := prev[id]; !ok || want != st || seqOf[id] != 0 {
					t.Fatalf("chunk event %d names %s (%s): want each of %v once, with its previous status", ev.Seq, id, st, prev)
				}
				seqOf[id] = ev.Seq
			}
		}
	}
	if len(seqOf) != len(prev) {
		t.Fatalf("the chunk events name %d messages, want %d", len(seqOf), len(prev))
	}
	for id, seq := range seqOf {
		for _, f := range []quarantine.AuditFilter{{Subject: id}, {Subject: id, Action: quarantine.ActionDiscard}} {
			hist, err := s.ListAudit(ctx, f)
			wantOK(t, err, "ListAudit by subject")
			if len(hist) != 1 || hist[0].Seq != seq {
				t.Fatalf("history of %s (%+v) = %+v, want its chunk's event %d", id, f, hist, seq)
			}
		}
		if hist, err := s.ListAudit(ctx, quarantine.AuditFilter{Subject: id, Seq: seq}); err != nil || len(hist) != 0 {
			t.Fatalf("history of %s after seq %d = %+v, %v; want none", id, seq, hist, err)
		}
	}
	v, err := s.VerifyAudit(ctx)
	if err != nil || !v.OK {
		t.Fatalf("VerifyAudit = %+v, %v", v, err)
	}
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

package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// testHostileOperations sends hostile values through every operation of
// issue 4: each is answered or refused (EINVALID, ENOTFOUND,
// EUNPROCESSABLE, EPRECONDITION), never EINTERNAL, and the stored
// messages carrying them are found by their own values.
func testHostileOperations(t *testing.T, h Harness) {
	s := h.Open(t)
	ctx := t.Context()
	var msgs []*quarantine.Message
	for i, v := range hostileStrings {
		msgs = append(msgs, hostileMsg(v, i))
	}
	insert(t, s, msgs...)
	now := time.Now()
	for i, v := range hostileStrings {
		m := msgs[i]
		raw := quarantine.Filter{Queue: []string{v}, Owner: []string{v}, JobName: []string{v}, Text: v}
		own := quarantine.Filter{Queue: []string{m.Queue}, Owner: []string{m.Owner}, JobName: []string{m.JobName}, Text: m.Queue}
		for _, f := range []quarantine.Filter{raw, own} {
			_, err := s.Sample(ctx, quarantine.SampleRequest{Filter: f, Size: 3, Seed: int64(i)})
			notInternal(t, err, fmt.Sprintf("Sample %q", v))
			_, err = s.Sample(ctx, quarantine.SampleRequest{Filter: f, Size: 3, StratifyBy: quarantine.StratifyFingerprint})
			notInternal(t, err, fmt.Sprintf("Sample stratified %q", v))
			_, err = s.Groups(ctx, f)
			notInternal(t, err, fmt.Sprintf("Groups %q", v))
			_, err = s.QueueStats(ctx, f, now)
			notInternal(t, err, fmt.Sprintf("QueueStats %q", v))
			g := f
			g.Text = ""
			_, err = s.Groups(ctx, g)
			notInternal(t, err, fmt.Sprintf("Groups %q", v))
			_, err = s.QueueStats(ctx, quarantine.Filter{Queue: g.Queue, Owner: g.Owner}, now)
			notInternal(t, err, fmt.Sprintf("QueueStats %q", v))
		}
		got, err := s.Sample(ctx, quarantine.SampleRequest{Filter: own, Size: 3})
		wantOK(t, err, "Sample")
		if len(got) != 1 || got[0].ID != m.ID {
			t.Fatalf("hostile %q: a sample by its own values holds %v, want %s", v, ids(got), m.ID)
		}
		groups, err := s.Groups(ctx, quarantine.Filter{Queue: own.Queue, Owner: own.Owner})
		wantOK(t, err, "Groups")
		if len(groups) != 1 || groups[0].ExampleID != m.ID || groups[0].Count != 1 {
			t.Fatalf("hostile %q: groups %+v", v, groups)
		}
		stats, err := s.QueueStats(ctx, quarantine.Filter{Queue: own.Queue}, now)
		wantOK(t, err, "QueueStats")
		switch {
		case m.Queue == "":
			// A queue no broker could route is not stored (invalid_queue):
			// such messages share the empty queue.
			if quarantine.QueueNameProblem(v) == "" || !slices.Contains(m.Flags, quarantine.FlagInvalidQueue) {
				t.Fatalf("hostile %q: stored without a queue, flags %v", v, m.Flags)
			}
			if len(stats) != 1 || stats[0].Queue != "" {
				t.Fatalf("hostile %q: queue stats %+v", v, stats)
			}
		case len(stats) != 1 || stats[0].Queue != m.Queue || stats[0].OldestID != m.ID:
			t.Fatalf("hostile %q: queue stats %+v", v, stats)
		}
		e := quarantine.PayloadEdit{MessageID: v, IfMatch: m.PayloadSHA256, Payload: []byte(v), Reason: v, Actor: v}
		_, err = s.EditPayload(ctx, e)
		notInternal(t, err, fmt.Sprintf("EditPayload %q", v))
		e.MessageID = m.ID
		if _, err := s.EditPayload(ctx, e); quarantine.ErrorCode(err) != "" && quarantine.ErrorCode(err) != quarantine.EINVALID &&
			quarantine.ErrorCode(err) != quarantine.EUNPROCESSABLE {
			t.Fatalf("EditPayload with hostile payload and reason %q: %v", v, err)
		}
		_, err = s.Discard(ctx, quarantine.Discard{IDs: []string{v, m.ID + v}, Reason: v, Actor: v})
		notInternal(t, err, fmt.Sprintf("Discard %q", v))
		_, err = s.Discard(ctx, quarantine.Discard{Filter: &raw, Reason: "r", Actor: v})
		notInternal(t, err, fmt.Sprintf("Discard by filter %q", v))
	}
	_, err := s.Discard(ctx, quarantine.Discard{Filter: &quarantine.Filter{}, Reason: "all", Actor: "bob"})
	wantOK(t, err, "Discard all")
	v, err := s.VerifyAudit(ctx)
	if err != nil || !v.OK {
		t.Fatalf("VerifyAudit after hostile operations = %+v, %v", v, err)
	}
}

package storetest

import (
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// testReplayGroupCounts: the failure-group counters (Groups, QueueStats)
// follow every status move a replay makes (start, published, failed,
// cancel), with the bounds and the example of each group recounted when
// the messages at its edges leave it.
func testReplayGroupCounts(t *testing.T, h Harness) {
	s, _ := openClock(t, h)
	ctx := t.Context()
	now := baseTime.Add(72 * time.Hour).Truncate(time.Microsecond)
	var msgs, batch []*quarantine.Message
	for i := range 36 {
		m := newMsg(withQueue([]string{"orders", "billing"}[i%2]), withOwner([]string{"team-a", ""}[i/18]),
			withReason([]string{"smtp timeout after 30s", "boom"}[i%3/2]),
			withFailedAt(baseTime.Add(time.Duration((i*7)%36)*time.Minute)))
		if i%11 == 5 {
			m.FailedAt = msgs[len(msgs)-1].FailedAt // ties on failed_at
		}
		msgs = append(msgs, m)
		if i%4 != 3 {
			batch = append(batch, m)
		}
	}
	insert(t, s, msgs...)
	check := func(when string) {
		t.Helper()
		for _, f := range []quarantine.Filter{{}, {Status: []quarantine.Status{quarantine.StatusReplaying}},
			{Status: []quarantine.Status{quarantine.StatusQuarantined}}, {Status: []quarantine.Status{quarantine.StatusReplayed}},
			{Queue: []string{"billing"}, Owner: []string{"team-a"}}} {
			got, err := s.Groups(ctx, f)
			wantOK(t, err, "Groups")
			if want := expectedGroups(f, msgs); !sameGroups(got, want) {
				t.Fatalf("%s: Groups(%+v) =\n%+v\nwant\n%+v", when, f, got, want)
			}
			stats, err := s.QueueStats(ctx, f, now)
			wantOK(t, err, "QueueStats")
			if want := expectedQueueStats(f, msgs, now); !sameQueueStats(stats, want) {
				t.Fatalf("%s: QueueStats(%+v) =\n%+v\nwant\n%+v", when, f, stats, want)
			}
		}
	}
	check("after insert")
	// Latest and earliest first: they leave their groups at the edges.
	sortDesc(batch)
	order := append([]*quarantine.Message{}, batch[:3]...)
	order = append(order, batch[len(batch)-3:]...)
	order = append(order, batch[3:len(batch)-3]...)
	b := createReplay(t, s, replayReq(ids(order)...), nil)
	check("after the start") // a pin moves no message: a lease does
	leases, err := s.LeaseReplayItems(ctx, b.ID, "engine-1", 10, time.Minute, 0)
	wantOK(t, err, "LeaseReplayItems")
	if len(leases) != 10 {
		t.Fatalf("%d leased, want 10", len(leases))
	}
	byID := map[string]*quarantine.Message{}
	for _, m := range msgs {
		byID[m.ID] = m
	}
	check("after the lease") // a lease moves no message: the record does
	var results []quarantine.ReplayResult
	for i, l := range leases {
		r := published(l)
		byID[l.Item.MessageID].Status = quarantine.StatusReplayed
		if i%3 == 2 {
			r.Outcome, r.Reason = quarantine.ItemFailed, "NOT_FOUND - no queue"
			byID[l.Item.MessageID].Status = quarantine.StatusQuarantined
		}
		results = append(results, r)
	}
	stale, err := s.RecordReplayResults(ctx, results)
	wantOK(t, err, "RecordReplayResults")
	if len(stale) != 0 {
		t.Fatalf("stale %v", stale)
	}
	wantStatuses(t, s, msgs)
	check("after published and failed results")
	_, err = s.ChangeReplay(ctx, quarantine.ReplayChange{BatchID: b.ID, Action: quarantine.ReplayActCancel, Actor: "bob", Reason: "enough"})
	wantOK(t, err, "ChangeReplay cancel")
	for _, m := range batch {
		if m.Status == quarantine.StatusReplaying {
			m.Status = quarantine.StatusQuarantined
		}
	}
	wantStatuses(t, s, msgs)
	check("after the cancel")
	// A second replay of the same messages moves them again, at its
	// record.
	var again []*quarantine.Message
	for _, m := range msgs {
		if m.Status == quarantine.StatusQuarantined {
			again = append(again, m)
		}
	}
	b2 := createReplay(t, s, replayReq(ids(again)...), nil)
	leases, err = s.LeaseReplayItems(ctx, b2.ID, "engine-1", len(again), time.Minute, 0)
	wantOK(t, err, "LeaseReplayItems")
	if len(leases) != len(again) {
		t.Fatalf("%d leased, want %d", len(leases), len(again))
	}
	check("after a second lease")
	results = results[:0]
	for _, l := range leases {
		results = append(results, published(l))
		byID[l.Item.MessageID].Status = quarantine.StatusReplayed
	}
	if stale, err := s.RecordReplayResults(ctx, results); err != nil || len(stale) != 0 {
		t.Fatalf("RecordReplayResults = %v, %v", stale, err)
	}
	wantStatuses(t, s, msgs)
	check("after the second record")
}

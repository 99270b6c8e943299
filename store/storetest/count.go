package storetest

import (
	"cmp"
	"slices"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// expectedCounts is the reference model of CountByQueue.
func expectedCounts(f quarantine.Filter, msgs []*quarantine.Message) []quarantine.QueueCount {
	f.After = nil
	n := map[[2]string]int64{}
	for _, m := range msgs {
		if matches(f, m) {
			n[[2]string{m.Queue, string(m.Status)}]++
		}
	}
	var out []quarantine.QueueCount
	for k, c := range n {
		out = append(out, quarantine.QueueCount{Queue: k[0], Status: quarantine.Status(k[1]), Count: c})
	}
	slices.SortFunc(out, func(a, b quarantine.QueueCount) int {
		return cmp.Or(cmp.Compare(a.Queue, b.Queue), cmp.Compare(a.Status, b.Status))
	})
	return out
}

func testCountByQueue(t *testing.T, h Harness) {
	s := h.Open(t)
	got, err := s.CountByQueue(t.Context(), quarantine.Filter{})
	wantOK(t, err, "CountByQueue")
	if len(got) != 0 {
		t.Fatalf("empty store counts %v", got)
	}
	msgs := listDataset(t, h, s)
	last := msgs[len(msgs)-1]
	cases := []struct {
		name string
		f    quarantine.Filter
	}{
		{"none", quarantine.Filter{}},
		{"owner", quarantine.Filter{Owner: []string{"team-a"}}},
		{"status", quarantine.Filter{Status: []quarantine.Status{quarantine.StatusReplayed, quarantine.StatusDiscarded}}},
		{"queue+class", quarantine.Filter{Queue: []string{"orders"}, FailureClass: []quarantine.FailureClass{quarantine.ClassPermanent}}},
		{"source", quarantine.Filter{Source: []string{"src-b"}}},
		{"source+job", quarantine.Filter{Source: []string{"src-a"}, JobName: []string{"charge"}}},
		{"source+owner+status", quarantine.Filter{Source: []string{"src-b"}, Owner: []string{"team-a", "team-b"}, Status: []quarantine.Status{quarantine.StatusQuarantined}}},
		{"source+class", quarantine.Filter{Source: []string{"src-a", "src-b"}, FailureClass: []quarantine.FailureClass{quarantine.ClassMalformed}}},
		{"text", quarantine.Filter{Text: "needle"}},
		{"time", quarantine.Filter{FailedAfter: baseTime.Add(3 * time.Minute).Truncate(time.Microsecond), FailedBefore: baseTime.Add(9 * time.Minute).Truncate(time.Microsecond)}},
		{"cursor and limit ignored", quarantine.Filter{Limit: 1, After: quarantine.CursorOf(last)}},
		{"nothing", quarantine.Filter{Queue: []string{"nope"}}},
	}
	for _, c := range cases {
		got, err := s.CountByQueue(t.Context(), c.f)
		wantOK(t, err, "CountByQueue "+c.name)
		want := expectedCounts(c.f, msgs)
		if !slices.Equal(got, want) {
			t.Errorf("%s: got %v, want %v", c.name, got, want)
		}
	}
	_, err = s.CountByQueue(t.Context(), quarantine.Filter{Status: []quarantine.Status{"nope"}})
	wantCode(t, err, quarantine.EINVALID)
}

func testOldestQuarantined(t *testing.T, h Harness) {
	s := h.Open(t)
	got, err := s.OldestQuarantined(t.Context())
	wantOK(t, err, "OldestQuarantined")
	if len(got) != 0 {
		t.Fatalf("empty store: %v", got)
	}
	t0 := baseTime.Add(-48 * time.Hour)
	// Queue "a": the oldest is discarded, then two quarantined messages tie
	// on failed_at; the smaller id must win although it was stored later.
	older := newMsg(withQueue("a"), withFailedAt(t0.Add(-time.Hour)))
	tieLow, tieHigh := newMsg(withQueue("a"), withFailedAt(t0)), newMsg(withQueue("a"), withFailedAt(t0))
	tieLow.ID, tieHigh.ID = quarantine.NewID(t0), quarantine.NewID(t0)
	if tieLow.ID > tieHigh.ID {
		tieLow.ID, tieHigh.ID = tieHigh.ID, tieLow.ID
	}
	newer := newMsg(withQueue("a"), withFailedAt(t0.Add(time.Minute)))
	// Queue "b": nothing quarantined, so it is omitted.
	bOnly := newMsg(withQueue("b"), withFailedAt(t0.Add(-2*time.Hour)))
	// Queue "c": one message, in another source.
	c := newMsg(withQueue("c"), withSource("src-z"), withFailedAt(t0.Add(time.Hour)))
	// Queue "0": sorts first.
	zero := newMsg(withQueue("0"), withFailedAt(t0.Add(3*time.Hour)))
	insert(t, s, tieHigh, newer, bOnly)
	insert(t, s, older, tieLow, c, zero)
	setStatus(t, h, s, quarantine.StatusDiscarded, older)
	setStatus(t, h, s, quarantine.StatusReplayed, bOnly)

	got, err = s.OldestQuarantined(t.Context())
	wantOK(t, err, "OldestQuarantined")
	want := []quarantine.QueueOldest{
		{Queue: "0", MessageID: zero.ID, FailedAt: zero.FailedAt},
		{Queue: "a", MessageID: tieLow.ID, FailedAt: tieLow.FailedAt},
		{Queue: "c", MessageID: c.ID, FailedAt: c.FailedAt},
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i].Queue != want[i].Queue || got[i].MessageID != want[i].MessageID || !got[i].FailedAt.Equal(want[i].FailedAt) {
			t.Fatalf("entry %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

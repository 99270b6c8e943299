package storetest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store"
)

// seedAudit appends n events by alternating actors, actions and subjects.
func seedAudit(t *testing.T, s store.Store, n int) []quarantine.AuditEvent {
	t.Helper()
	var out []quarantine.AuditEvent
	for i := range n {
		e := quarantine.NewAuditEvent([]string{"alice", "bob"}[i%2], []string{"message.edit", "replay.start", "message.discard"}[i%3],
			fmt.Sprintf("subject-%d", i%4), map[string]any{"i": i, "z": "last", "a": []any{1.5, "x", nil, true}, "nested": map[string]any{"k": "v<&>"}})
		got, err := s.AppendAudit(t.Context(), e)
		wantOK(t, err, "AppendAudit")
		out = append(out, got)
	}
	return out
}

// sameEvent reports how got differs from want ("" when equal). Details are
// compared as JSON values: a store may keep them in another layout.
func sameEvent(want, got quarantine.AuditEvent) string {
	var a, b any
	if json.Unmarshal(want.Details, &a) != nil || json.Unmarshal(got.Details, &b) != nil || !reflect.DeepEqual(a, b) {
		return fmt.Sprintf("details %s, want %s", got.Details, want.Details)
	}
	if want.Seq != got.Seq || !want.Time.Equal(got.Time) || want.Actor != got.Actor || want.Action != got.Action ||
		want.Subject != got.Subject || want.PrevHash != got.PrevHash || want.Hash != got.Hash {
		return fmt.Sprintf("got %+v, want %+v", got, want)
	}
	return ""
}

func headOf(e quarantine.AuditEvent) quarantine.AuditHead {
	return quarantine.AuditHead{Seq: e.Seq, Hash: e.Hash}
}

func testAudit(t *testing.T, h Harness) {
	t.Run("Empty", func(t *testing.T) {
		t.Parallel()
		s := h.Open(t)
		head, err := s.AuditHead(t.Context())
		wantOK(t, err, "AuditHead")
		if head != quarantine.EmptyHead() {
			t.Fatalf("head of an empty log = %+v", head)
		}
		v, err := s.VerifyAudit(t.Context())
		wantOK(t, err, "VerifyAudit")
		if !v.OK || v.Checked != 0 || v.Head != quarantine.EmptyHead() {
			t.Fatalf("empty log verifies as %+v", v)
		}
		evs, err := s.ListAudit(t.Context(), quarantine.AuditFilter{})
		wantOK(t, err, "ListAudit")
		if len(evs) != 0 {
			t.Fatalf("empty log lists %d events", len(evs))
		}
	})
	t.Run("AppendSeals", func(t *testing.T) { t.Parallel(); testAuditAppend(t, h) })
	t.Run("ListFilters", func(t *testing.T) { t.Parallel(); testAuditList(t, h) })
	t.Run("ConcurrentAppend", func(t *testing.T) { t.Parallel(); testAuditConcurrent(t, h) })
}

func testAuditAppend(t *testing.T, h Harness) {
	s := h.Open(t)
	evs := seedAudit(t, s, 6)
	nilDetails, err := s.AppendAudit(t.Context(), quarantine.AuditEvent{Actor: "carol", Action: "access.denied", Subject: "x"})
	wantOK(t, err, "AppendAudit without details")
	evs = append(evs, nilDetails)
	prev := quarantine.EmptyHead()
	for i, e := range evs {
		if e.Seq != int64(i+1) || e.PrevHash != prev.Hash || e.Time.IsZero() || e.Time.Nanosecond()%1000 != 0 {
			t.Fatalf("event %d: seq %d prev %s time %v; want seq %d linked to %s", i, e.Seq, e.PrevHash, e.Time, i+1, prev.Hash)
		}
		if h, err := e.ComputeHash(); err != nil || h != e.Hash || len(e.Hash) != 64 {
			t.Fatalf("event %d: hash %s does not seal its content (%s, %v)", e.Seq, e.Hash, h, err)
		}
		prev = headOf(e)
	}
	if string(nilDetails.Details) != "{}" {
		t.Fatalf("nil details sealed as %s, want {}", nilDetails.Details)
	}
	head, err := s.AuditHead(t.Context())
	wantOK(t, err, "AuditHead")
	if head != prev {
		t.Fatalf("AuditHead = %+v, want the last event %+v", head, prev)
	}
	listed, err := s.ListAudit(t.Context(), quarantine.AuditFilter{})
	wantOK(t, err, "ListAudit")
	if len(listed) != len(evs) {
		t.Fatalf("ListAudit = %d events, want %d", len(listed), len(evs))
	}
	for i := range evs {
		if d := sameEvent(evs[i], listed[i]); d != "" {
			t.Fatalf("listed event %d: %s", i+1, d)
		}
	}
	if v := quarantine.VerifyChain(listed, head); !v.OK {
		t.Fatalf("listed chain does not verify: %+v", v)
	}
	v, err := s.VerifyAudit(t.Context())
	wantOK(t, err, "VerifyAudit")
	if !v.OK || v.Checked != int64(len(evs)) || v.Head != head {
		t.Fatalf("VerifyAudit = %+v, want OK over %d to %+v", v, len(evs), head)
	}
	v, err = s.VerifyAudit(t.Context(), headOf(evs[2]), headOf(evs[5]))
	wantOK(t, err, "VerifyAudit with earlier heads")
	if !v.OK {
		t.Fatalf("heads reported earlier are on the chain, yet %+v", v)
	}
	v, err = s.VerifyAudit(t.Context(), quarantine.AuditHead{Seq: 3, Hash: evs[3].Hash})
	wantOK(t, err, "VerifyAudit")
	if v.OK || v.FirstBadSeq != 3 {
		t.Fatalf("a head reported earlier that the chain does not carry: %+v, want bad at 3", v)
	}
}

func testAuditList(t *testing.T, h Harness) {
	s := h.Open(t)
	evs := seedAudit(t, s, 24)
	pick := func(keep func(e quarantine.AuditEvent) bool) []int64 {
		var out []int64
		for _, e := range evs {
			if keep(e) {
				out = append(out, e.Seq)
			}
		}
		return out
	}
	mid := evs[10].Time
	late := evs[17].Time
	cases := []struct {
		name string
		f    quarantine.AuditFilter
		want []int64
	}{
		{"all", quarantine.AuditFilter{}, pick(func(quarantine.AuditEvent) bool { return true })},
		{"subject", quarantine.AuditFilter{Subject: "subject-1"}, pick(func(e quarantine.AuditEvent) bool { return e.Subject == "subject-1" })},
		{"actor", quarantine.AuditFilter{Actor: "bob"}, pick(func(e quarantine.AuditEvent) bool { return e.Actor == "bob" })},
		{"action", quarantine.AuditFilter{Action: "replay.start"}, pick(func(e quarantine.AuditEvent) bool { return e.Action == "replay.start" })},
		{"after", quarantine.AuditFilter{After: mid}, pick(func(e quarantine.AuditEvent) bool { return !e.Time.Before(mid) })},
		{"before", quarantine.AuditFilter{Before: mid}, pick(func(e quarantine.AuditEvent) bool { return e.Time.Before(mid) })},
		{"range", quarantine.AuditFilter{After: mid, Before: late}, pick(func(e quarantine.AuditEvent) bool { return !e.Time.Before(mid) && e.Time.Before(late) })},
		{"seq cursor", quarantine.AuditFilter{Seq: 20}, []int64{21, 22, 23, 24}},
		{"limit", quarantine.AuditFilter{Limit: 3}, []int64{1, 2, 3}},
		{"cursor+limit", quarantine.AuditFilter{Seq: 5, Limit: 2}, []int64{6, 7}},
		{"combined", quarantine.AuditFilter{Actor: "alice", Action: "message.edit", Seq: 3}, pick(func(e quarantine.AuditEvent) bool {
			return e.Actor == "alice" && e.Action == "message.edit" && e.Seq > 3
		})},
		{"no match", quarantine.AuditFilter{Actor: "' OR 1=1 --"}, nil},
	}
	for _, c := range cases {
		got, err := s.ListAudit(t.Context(), c.f)
		wantOK(t, err, "ListAudit "+c.name)
		var seqs []int64
		for _, e := range got {
			seqs = append(seqs, e.Seq)
			if d := sameEvent(evs[e.Seq-1], e); d != "" {
				t.Fatalf("%s: event %d: %s", c.name, e.Seq, d)
			}
		}
		if fmt.Sprint(seqs) != fmt.Sprint(c.want) {
			t.Errorf("%s: got seqs %v, want %v", c.name, seqs, c.want)
		}
	}
	// Paging by seq walks everything once.
	var walked []int64
	f := quarantine.AuditFilter{Limit: 5}
	for {
		page, err := s.ListAudit(t.Context(), f)
		wantOK(t, err, "ListAudit page")
		for _, e := range page {
			walked = append(walked, e.Seq)
		}
		if len(page) < f.Limit {
			break
		}
		f.Seq = page[len(page)-1].Seq
	}
	if len(walked) != len(evs) || walked[0] != 1 || walked[len(walked)-1] != int64(len(evs)) {
		t.Fatalf("paging walked %v", walked)
	}
	for _, c := range []struct {
		field string
		f     quarantine.AuditFilter
	}{{"limit", quarantine.AuditFilter{Limit: -1}}, {"cursor", quarantine.AuditFilter{Seq: -1}}, {"actor", quarantine.AuditFilter{Actor: "a\x00"}}} {
		_, err := s.ListAudit(t.Context(), c.f)
		wantCode(t, err, quarantine.EINVALID)
		if quarantine.ErrorField(err) != c.field {
			t.Errorf("invalid %s: field %q", c.field, quarantine.ErrorField(err))
		}
	}
}

func testAuditConcurrent(t *testing.T, h Harness) {
	s := h.Open(t)
	const workers, each = 8, 10
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				e := quarantine.NewAuditEvent(fmt.Sprintf("worker-%d", w), "test.append", fmt.Sprint(i), map[string]int{"w": w, "i": i})
				if _, err := s.AppendAudit(t.Context(), e); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	evs, err := s.ListAudit(t.Context(), quarantine.AuditFilter{Limit: quarantine.MaxLimit})
	wantOK(t, err, "ListAudit")
	if len(evs) != workers*each {
		t.Fatalf("%d events stored, want %d", len(evs), workers*each)
	}
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("seq %d at position %d: not contiguous", e.Seq, i)
		}
	}
	v, err := s.VerifyAudit(t.Context())
	wantOK(t, err, "VerifyAudit")
	if !v.OK || v.Checked != workers*each || v.Head != headOf(evs[len(evs)-1]) {
		t.Fatalf("VerifyAudit after concurrent appends = %+v", v)
	}
}

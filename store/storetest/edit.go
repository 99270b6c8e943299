package storetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store"
)

// edit returns an edit of m's current payload to p by alice.
func edit(m *quarantine.Message, ifMatch string, p []byte) quarantine.PayloadEdit {
	return quarantine.PayloadEdit{MessageID: m.ID, IfMatch: ifMatch, Payload: p, Reason: "fix the amount", Actor: "alice"}
}

func testEditPayload(t *testing.T, h Harness) {
	runParallel(t, h, []subtest{
		{"Chain", testEditChain},
		{"ConcurrentSameIfMatch", testEditConcurrent},
		{"ConcurrentNoOp", testEditConcurrentNoOp},
		{"NoOp", testEditNoOp},
		{"Refusals", testEditRefusals},
	})
}

func testEditChain(t *testing.T, h Harness) {
	s := h.Open(t)
	ctx := t.Context()
	m := newMsg()
	other := newMsg()
	insert(t, s, m, other)
	payloads := [][]byte{
		m.Payload,
		[]byte(`{"order_id":"o-1","amount":10}`),
		{0, 1, 2, 0xff, 0xfe}, // binary
		[]byte(`{"order_id":"o-1","amount":11, "note":"grüße"}`),
		{}, // empty
		[]byte(`{"order_id":"o-1","amount":12}`),
	}
	types := []string{m.ContentType, "", "application/octet-stream", "application/json", "", ""}
	wantTypes := []string{m.ContentType, m.ContentType, "application/octet-stream", "application/json", "application/json", "application/json"}
	for n := 1; n < len(payloads); n++ {
		e := edit(m, quarantine.PayloadHash(payloads[n-1]), payloads[n])
		e.ContentType = types[n]
		e.Reason = fmt.Sprintf("edit %d", n)
		got, err := s.EditPayload(ctx, e)
		wantOK(t, err, fmt.Sprintf("EditPayload %d", n))
		if got.PayloadVersion != n+1 || got.PayloadSHA256 != quarantine.PayloadHash(payloads[n]) ||
			got.PayloadSize != len(payloads[n]) || !bytes.Equal(got.Payload, payloads[n]) || got.ContentType != wantTypes[n] {
			t.Fatalf("after edit %d: version %d hash %s size %d type %q payload %q", n, got.PayloadVersion,
				got.PayloadSHA256, got.PayloadSize, got.ContentType, got.Payload)
		}
		if got.IdempotencyKey != m.IdempotencyKey || got.ID != m.ID || got.DedupeKey != "" && got.DedupeKey != m.DedupeKey {
			t.Fatalf("edit %d changed the identity: key %q id %q", n, got.IdempotencyKey, got.ID)
		}
		if got.UpdatedAt.Before(m.UpdatedAt) {
			t.Fatalf("edit %d: updated_at %v went back from %v", n, got.UpdatedAt, m.UpdatedAt)
		}
	}
	vs, err := s.PayloadVersions(ctx, m.ID)
	wantOK(t, err, "PayloadVersions")
	if len(vs) != len(payloads) {
		t.Fatalf("PayloadVersions = %d versions, want %d", len(vs), len(payloads))
	}
	for i, v := range vs {
		wantPrev := ""
		if i > 0 {
			wantPrev = vs[i-1].SHA256 // old SHA-256 of edit n = new SHA-256 of edit n-1
		}
		if v.Version != i+1 || v.SHA256 != quarantine.PayloadHash(payloads[i]) || v.PrevSHA256 != wantPrev ||
			v.Size != len(payloads[i]) || v.ContentType != wantTypes[i] || v.Payload != nil {
			t.Fatalf("version %d = %+v", i+1, v)
		}
		if i > 0 && (v.Actor != "alice" || v.Reason != fmt.Sprintf("edit %d", i)) {
			t.Fatalf("version %d: actor %q reason %q", i+1, v.Actor, v.Reason)
		}
		full, err := s.PayloadVersion(ctx, m.ID, v.Version)
		wantOK(t, err, "PayloadVersion")
		if !bytes.Equal(full.Payload, payloads[i]) || full.SHA256 != v.SHA256 {
			t.Fatalf("PayloadVersion %d holds %q, want %q", v.Version, full.Payload, payloads[i])
		}
	}
	if vs[1].PrevSHA256 != m.PayloadSHA256 {
		t.Fatalf("the first edit's old SHA-256 %s is not the ingested %s", vs[1].PrevSHA256, m.PayloadSHA256)
	}
	// One message.edit event per edit, with the hashes, in the chain.
	evs, err := s.ListAudit(ctx, quarantine.AuditFilter{Subject: m.ID, Action: quarantine.ActionEdit})
	wantOK(t, err, "ListAudit")
	if len(evs) != len(payloads)-1 {
		t.Fatalf("%d edit events, want %d", len(evs), len(payloads)-1)
	}
	for i, ev := range evs {
		var d struct {
			Version   int    `json:"version"`
			OldSHA256 string `json:"old_sha256"`
			NewSHA256 string `json:"new_sha256"`
			Reason    string `json:"reason"`
		}
		if err := json.Unmarshal(ev.Details, &d); err != nil {
			t.Fatal(err)
		}
		if ev.Actor != "alice" || d.Version != i+2 || d.OldSHA256 != vs[i].SHA256 || d.NewSHA256 != vs[i+1].SHA256 || d.Reason != vs[i+1].Reason {
			t.Fatalf("edit event %d = %s %s", i, ev.Actor, ev.Details)
		}
	}
	v, err := s.VerifyAudit(ctx)
	if err != nil || !v.OK {
		t.Fatalf("VerifyAudit = %+v, %v", v, err)
	}
	// The other message is untouched.
	got, err := s.GetMessage(ctx, other.ID)
	wantOK(t, err, "GetMessage")
	wantSame(t, other, got, true)
}

func testEditConcurrent(t *testing.T, h Harness) {
	s := h.Open(t)
	m := newMsg()
	insert(t, s, m)
	payload := func(i int) []byte { return fmt.Appendf(nil, `{"editor":%d}`, i) }
	won := wantOneWinner(t, raceEdits(t, s, m, 20, payload))
	wantEditedOnce(t, s, m, payload(won))
}

// raceEdits runs editors concurrent edits of m from its current payload,
// the i-th to payload(i), and returns their errors.
func raceEdits(t *testing.T, s store.Store, m *quarantine.Message, editors int, payload func(i int) []byte) []error {
	var wg sync.WaitGroup
	errs := make([]error, editors)
	for i := range editors {
		wg.Go(func() { _, errs[i] = s.EditPayload(t.Context(), edit(m, m.PayloadSHA256, payload(i))) })
	}
	wg.Wait()
	return errs
}

// wantOneWinner fails t unless exactly one of the editors' errs is nil
// and the others are EPRECONDITION; it returns the winner.
func wantOneWinner(t *testing.T, errs []error) int {
	t.Helper()
	won := -1
	for i, err := range errs {
		switch quarantine.ErrorCode(err) {
		case "":
			if won >= 0 {
				t.Fatalf("editors %d and %d both won", won, i)
			}
			won = i
		case quarantine.EPRECONDITION:
		default:
			t.Fatalf("editor %d: %v, want success or EPRECONDITION", i, err)
		}
	}
	if won < 0 {
		t.Fatal("no editor won")
	}
	return won
}

// wantEditedOnce fails t unless m has two payload versions, the second
// p's following m's, and the log one edit event.
func wantEditedOnce(t *testing.T, s store.Store, m *quarantine.Message, p []byte) {
	t.Helper()
	vs, err := s.PayloadVersions(t.Context(), m.ID)
	wantOK(t, err, "PayloadVersions")
	if len(vs) != 2 || vs[1].SHA256 != quarantine.PayloadHash(p) || vs[1].PrevSHA256 != m.PayloadSHA256 {
		t.Fatalf("versions after the race: %+v", vs)
	}
	evs, err := s.ListAudit(t.Context(), quarantine.AuditFilter{Action: quarantine.ActionEdit})
	wantOK(t, err, "ListAudit")
	if len(evs) != 1 {
		t.Fatalf("%d edit events, want 1", len(evs))
	}
}

func testEditRefusals(t *testing.T, h Harness) {
	s := h.Open(t)
	ctx := t.Context()
	m, replaying, discarded, replayed := newMsg(), newMsg(), newMsg(), newMsg()
	insert(t, s, m, replaying, discarded, replayed)
	setStatus(t, h, s, quarantine.StatusReplaying, replaying)
	setStatus(t, h, s, quarantine.StatusDiscarded, discarded)
	setStatus(t, h, s, quarantine.StatusReplayed, replayed)
	p := []byte(`{"x":1}`)
	cases := []struct {
		name string
		e    quarantine.PayloadEdit
		code string
	}{
		{"unknown message", edit(&quarantine.Message{ID: quarantine.NewID(baseTime)}, m.PayloadSHA256, p), quarantine.ENOTFOUND},
		{"malformed id", edit(&quarantine.Message{ID: "'; --"}, m.PayloadSHA256, p), quarantine.ENOTFOUND},
		{"stale If-Match", edit(m, quarantine.PayloadHash([]byte("old")), p), quarantine.EPRECONDITION},
		{"replaying", edit(replaying, replaying.PayloadSHA256, p), quarantine.ECONFLICT},
		{"discarded", edit(discarded, discarded.PayloadSHA256, p), quarantine.ECONFLICT},
		{"replaying with stale If-Match", edit(replaying, m.PayloadSHA256, p), quarantine.ECONFLICT},
		{"empty reason", func() quarantine.PayloadEdit { e := edit(m, m.PayloadSHA256, p); e.Reason = " "; return e }(), quarantine.EUNPROCESSABLE},
		{"If-Match not a hash", edit(m, "abc", p), quarantine.EINVALID},
	}
	for _, c := range cases {
		_, err := s.EditPayload(ctx, c.e)
		if quarantine.ErrorCode(err) != c.code {
			t.Errorf("%s: %v, want %s", c.name, err, c.code)
		}
	}
	for _, x := range []*quarantine.Message{m, replaying, discarded} {
		vs, err := s.PayloadVersions(ctx, x.ID)
		if err != nil || len(vs) != 1 {
			t.Fatalf("a refused edit left %d versions (%v)", len(vs), err)
		}
	}
	if evs, _ := s.ListAudit(ctx, quarantine.AuditFilter{}); len(evs) != 0 {
		t.Fatalf("refused edits appended %d audit events", len(evs))
	}
	// A replayed message may still be edited (to replay it again).
	if _, err := s.EditPayload(ctx, edit(replayed, replayed.PayloadSHA256, p)); err != nil {
		t.Fatalf("edit of a replayed message: %v", err)
	}
}

// testEditConcurrentNoOp races editors that all send the current payload
// with the current If-Match: a no-op edit is refused, so none wins, the
// ETag stays valid and nothing is recorded. Then editors that all send
// the same new payload: exactly one wins, the others find the ETag
// changed, and the version count grows by one.
func testEditConcurrentNoOp(t *testing.T, h Harness) {
	s := h.Open(t)
	m := newMsg()
	insert(t, s, m)
	const editors = 20
	race := func(p []byte) []error { return raceEdits(t, s, m, editors, func(int) []byte { return p }) }
	for i, err := range race(m.Payload) {
		if quarantine.ErrorCode(err) != quarantine.EUNPROCESSABLE || quarantine.ErrorField(err) != "/payload" {
			t.Fatalf("no-op editor %d: %v (field %q), want EUNPROCESSABLE naming /payload", i, err, quarantine.ErrorField(err))
		}
	}
	vs, err := s.PayloadVersions(t.Context(), m.ID)
	wantOK(t, err, "PayloadVersions")
	if len(vs) != 1 {
		t.Fatalf("%d versions after a race of no-op edits, want 1", len(vs))
	}
	p := []byte(`{"order_id":"o-1","amount":99}`)
	wantOneWinner(t, race(p))
	wantEditedOnce(t, s, m, p)
}

// testEditNoOp: an edit to the current payload is refused whatever its
// content type, a stale If-Match is still a precondition failure, and
// going back to an earlier payload is a real change.
func testEditNoOp(t *testing.T, h Harness) {
	s := h.Open(t)
	ctx := t.Context()
	m := newMsg()
	insert(t, s, m)
	b := []byte(`{"order_id":"o-1","amount":10}`)
	_, err := s.EditPayload(ctx, edit(m, m.PayloadSHA256, b))
	wantOK(t, err, "EditPayload")
	same := edit(m, quarantine.PayloadHash(b), b)
	same.ContentType = "application/vnd.other+json"
	if _, err := s.EditPayload(ctx, same); quarantine.ErrorCode(err) != quarantine.EUNPROCESSABLE {
		t.Fatalf("no-op edit: %v, want EUNPROCESSABLE", err)
	}
	if _, err := s.EditPayload(ctx, edit(m, m.PayloadSHA256, b)); quarantine.ErrorCode(err) != quarantine.EPRECONDITION {
		t.Fatalf("stale If-Match with the current payload: %v, want EPRECONDITION", err)
	}
	back, err := s.EditPayload(ctx, edit(m, quarantine.PayloadHash(b), m.Payload))
	wantOK(t, err, "EditPayload back to the first payload")
	if back.PayloadVersion != 3 || back.PayloadSHA256 != m.PayloadSHA256 {
		t.Fatalf("after going back: version %d hash %s", back.PayloadVersion, back.PayloadSHA256)
	}
	vs, err := s.PayloadVersions(ctx, m.ID)
	wantOK(t, err, "PayloadVersions")
	if len(vs) != 3 {
		t.Fatalf("%d versions, want 3", len(vs))
	}
}

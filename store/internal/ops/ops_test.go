package ops

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
)

func TestPlanEdit(t *testing.T) {
	t.Parallel()
	old := []byte(`{"n":1}`)
	e := quarantine.PayloadEdit{MessageID: quarantine.NewID(time.Now()), IfMatch: quarantine.PayloadHash(old),
		Payload: []byte(`{"n":2}`), Reason: "fix", Actor: "alice"}
	cur := Current{Status: quarantine.StatusQuarantined, SHA256: quarantine.PayloadHash(old), Version: 3, ContentType: "application/json"}
	p, err := PlanEdit(e, cur)
	if err != nil {
		t.Fatal(err)
	}
	if p.Version != 4 || p.SHA256 != quarantine.PayloadHash(e.Payload) || p.PrevSHA256 != cur.SHA256 ||
		p.ContentType != "application/json" || p.Actor != "alice" ||
		p.Event.Action != quarantine.ActionEdit || p.Event.Subject != e.MessageID || p.Event.Actor != "alice" {
		t.Fatalf("plan %+v", p)
	}
	e2 := e
	e2.ContentType = "text/plain"
	if p, _ := PlanEdit(e2, cur); p.ContentType != "text/plain" {
		t.Fatalf("the edit's content type was not kept: %q", p.ContentType)
	}
	for _, c := range []struct {
		name string
		cur  Current
		e    quarantine.PayloadEdit
		code string
	}{
		{"replaying", Current{Status: quarantine.StatusReplaying, SHA256: cur.SHA256}, e, quarantine.ECONFLICT},
		{"discarded", Current{Status: quarantine.StatusDiscarded, SHA256: cur.SHA256}, e, quarantine.ECONFLICT},
		{"stale If-Match", Current{Status: quarantine.StatusQuarantined, SHA256: quarantine.PayloadHash([]byte("x"))}, e, quarantine.EPRECONDITION},
		{"unchanged", Current{Status: quarantine.StatusQuarantined, SHA256: quarantine.PayloadHash(e.Payload)},
			quarantine.PayloadEdit{MessageID: e.MessageID, IfMatch: quarantine.PayloadHash(e.Payload), Payload: e.Payload, Reason: "x", Actor: "a"},
			quarantine.EUNPROCESSABLE},
	} {
		if _, err := PlanEdit(c.e, c.cur); quarantine.ErrorCode(err) != c.code {
			t.Errorf("%s: %v, want %s", c.name, err, c.code)
		}
	}
	if err := CheckEdit(quarantine.PayloadEdit{MessageID: "not an id", IfMatch: e.IfMatch, Payload: e.Payload, Reason: "x", Actor: "a"}); quarantine.ErrorCode(err) != quarantine.ENOTFOUND {
		t.Errorf("CheckEdit of a bad id: %v, want ENOTFOUND", err)
	}
}

func TestDiscard(t *testing.T) {
	t.Parallel()
	a, b, c := quarantine.NewID(time.Now()), quarantine.NewID(time.Now()), quarantine.NewID(time.Now())
	var marked []string
	var audited []*quarantine.AuditEvent
	tx := fakeDiscardTx{
		selectFilter: func(quarantine.Filter, int) ([]quarantine.Selected, error) {
			t.Fatal("no filter was given")
			return nil, nil
		},
		selectIDs: func(ids []string) (map[string]quarantine.Status, error) {
			if !slices.Equal(ids, []string{a, b, c}) && !slices.Equal(ids, []string{b}) {
				t.Errorf("the store was asked for %q, want the valid ids once each", ids)
			}
			return map[string]quarantine.Status{a: quarantine.StatusQuarantined, b: quarantine.StatusReplaying, c: quarantine.StatusQuarantined}, nil
		},
		// c is quarantined, but a replay item holds it in flight.
		held:          map[string]string{c: "batch-1"},
		markDiscarded: func(ids []string) error { marked = append(marked, ids...); return nil },
		appendAudits:  func(evs []*quarantine.AuditEvent) error { audited = append(audited, evs...); return nil },
	}
	d := quarantine.Discard{IDs: []string{a, b, a, c, "nope"}, Reason: "junk", Actor: "bob"}
	if err := CheckDiscard(d); err != nil {
		t.Fatal(err)
	}
	res, err := Discard(context.Background(), d, tx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Changed, []string{a}) || !slices.Equal(marked, []string{a}) || len(res.Skipped) != 3 || res.Matched != 3 {
		t.Fatalf("result %+v, marked %v", res, marked)
	}
	if res.Skipped[1].ID != c || !strings.Contains(res.Skipped[1].Reason, "batch-1") {
		t.Fatalf("skipped %+v, want %s refused as held by batch-1", res.Skipped, c)
	}
	if len(audited) != 3 || audited[0].Action != quarantine.ActionDiscard || audited[0].Subject != a ||
		audited[1].Action != quarantine.ActionDiscardRefused || audited[1].Subject != b ||
		audited[2].Action != quarantine.ActionDiscardRefused || audited[2].Subject != c {
		t.Fatalf("%d events, want the discard of %s and the refusals of %s and %s, in selection order", len(audited), a, b, c)
	}
	// Nothing to change: nothing marked, the refusal still audited.
	marked, audited = nil, nil
	if _, err := Discard(context.Background(), quarantine.Discard{IDs: []string{b}, Reason: "junk", Actor: "bob"}, tx); err != nil {
		t.Fatal(err)
	}
	if marked != nil || len(audited) != 1 {
		t.Fatalf("marked %v, events %d: want none marked and one refusal", marked, len(audited))
	}
	if err := CheckDiscard(quarantine.Discard{IDs: []string{a}, Reason: "junk"}); quarantine.ErrorCode(err) != quarantine.EINTERNAL {
		t.Fatalf("a discard without actor: %v", err)
	}
}

func TestDiscardRefusesTooBroadAFilter(t *testing.T) {
	t.Parallel()
	var limits []int
	tx := fakeDiscardTx{
		selectFilter: func(f quarantine.Filter, limit int) ([]quarantine.Selected, error) {
			if f.After != nil {
				t.Error("the selection was given a cursor")
			}
			limits = append(limits, limit)
			return make([]quarantine.Selected, limit), nil // more than MaxBulk match
		},
		countFilter:   func(quarantine.Filter) (int64, error) { return 12345, nil },
		selectIDs:     func([]string) (map[string]quarantine.Status, error) { t.Fatal("no ids were given"); return nil, nil },
		markDiscarded: func([]string) error { t.Fatal("marked although the filter is too broad"); return nil },
		appendAudits:  func([]*quarantine.AuditEvent) error { t.Fatal("audited a refused request"); return nil },
	}
	after := quarantine.CursorOf(&quarantine.Message{ID: quarantine.NewID(time.Now()), FailedAt: time.Now()})
	_, err := Discard(context.Background(), quarantine.Discard{Filter: &quarantine.Filter{Queue: []string{"orders"}, After: after}, Reason: "junk", Actor: "bob"}, tx)
	if quarantine.ErrorCode(err) != quarantine.EUNPROCESSABLE || !strings.Contains(err.Error(), "12345") {
		t.Fatalf("%v, want EUNPROCESSABLE with the count", err)
	}
	if !slices.Equal(limits, []int{quarantine.MaxBulk + 1}) {
		t.Fatalf("limits %v, want one selection of MaxBulk+1", limits)
	}
}

func TestEditWritesOnlyWhatThePlanAllows(t *testing.T) {
	t.Parallel()
	id := quarantine.NewID(time.Now())
	old := []byte(`{"a":1}`)
	e := quarantine.PayloadEdit{MessageID: id, IfMatch: quarantine.PayloadHash(old), Payload: []byte(`{"a":2}`), Reason: "fix", Actor: "bob"}
	var steps []string
	tx := func(st quarantine.Status, held map[string]string) EditTx {
		return fakeEditTx{
			held: held,
			current: func() (Current, error) {
				steps = append(steps, "current")
				return Current{Status: st, SHA256: quarantine.PayloadHash(old), Version: 3, ContentType: "application/json"}, nil
			},
			write: func(p EditPlan, payload []byte) error {
				steps = append(steps, "write")
				if p.Version != 4 || p.PrevSHA256 != e.IfMatch || string(payload) != string(e.Payload) {
					t.Errorf("plan %+v, payload %s", p, payload)
				}
				return nil
			},
			audit: func(ev *quarantine.AuditEvent) error { steps = append(steps, "audit:"+ev.Action); return nil },
			get: func() (*quarantine.Message, error) {
				steps = append(steps, "get")
				return &quarantine.Message{ID: id}, nil
			},
		}
	}
	if _, err := Edit(context.Background(), e, tx(quarantine.StatusQuarantined, nil)); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(steps, ","); got != "current,write,audit:"+quarantine.ActionEdit+",get" {
		t.Fatalf("steps %s", got)
	}
	steps = nil
	if _, err := Edit(context.Background(), e, tx(quarantine.StatusReplaying, nil)); quarantine.ErrorCode(err) != quarantine.ECONFLICT || len(steps) != 1 {
		t.Fatalf("an edit while replaying: %v after %v, want ECONFLICT before any write", err, steps)
	}
	steps = nil
	if _, err := Edit(context.Background(), e, tx(quarantine.StatusQuarantined, map[string]string{id: "batch-1"})); quarantine.ErrorCode(err) != quarantine.ECONFLICT || len(steps) != 1 {
		t.Fatalf("an edit while a replay item holds the message: %v after %v, want ECONFLICT before any write", err, steps)
	}
}

// fakeDiscardTx is a DiscardTx of functions, for the tests.
type fakeDiscardTx struct {
	selectFilter  func(quarantine.Filter, int) ([]quarantine.Selected, error)
	countFilter   func(quarantine.Filter) (int64, error)
	selectIDs     func([]string) (map[string]quarantine.Status, error)
	markDiscarded func([]string) error
	appendAudits  func([]*quarantine.AuditEvent) error
	held          map[string]string
}

func (f fakeDiscardTx) HeldBy(context.Context, []string) (map[string]string, error) {
	return f.held, nil
}

func (f fakeDiscardTx) SelectFilter(_ context.Context, fl quarantine.Filter, limit int) ([]quarantine.Selected, error) {
	return f.selectFilter(fl, limit)
}

func (f fakeDiscardTx) CountFilter(_ context.Context, fl quarantine.Filter) (int64, error) {
	return f.countFilter(fl)
}

func (f fakeDiscardTx) SelectIDs(_ context.Context, ids []string) (map[string]quarantine.Status, error) {
	return f.selectIDs(ids)
}

func (f fakeDiscardTx) MarkDiscarded(_ context.Context, ids []string) error {
	return f.markDiscarded(ids)
}

func (f fakeDiscardTx) AppendAudits(_ context.Context, evs []*quarantine.AuditEvent) error {
	return f.appendAudits(evs)
}

// fakeEditTx is an EditTx of functions, for the tests.
type fakeEditTx struct {
	current func() (Current, error)
	write   func(EditPlan, []byte) error
	audit   func(*quarantine.AuditEvent) error
	get     func() (*quarantine.Message, error)
	held    map[string]string
}

func (f fakeEditTx) HeldBy(context.Context, []string) (map[string]string, error) { return f.held, nil }

func (f fakeEditTx) Current(context.Context, string) (Current, error) { return f.current() }

func (f fakeEditTx) WritePayload(_ context.Context, e quarantine.PayloadEdit, p EditPlan) error {
	return f.write(p, e.Payload)
}

func (f fakeEditTx) AppendAudits(_ context.Context, evs []*quarantine.AuditEvent) error {
	for _, ev := range evs {
		if err := f.audit(ev); err != nil {
			return err
		}
	}
	return nil
}

func (f fakeEditTx) Message(context.Context, string) (*quarantine.Message, error) { return f.get() }

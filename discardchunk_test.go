package quarantine

import (
	"encoding/json"
	"slices"
	"testing"
)

func TestDigestIDs(t *testing.T) {
	// printf 'a\nb\n' | sha256sum
	const want = "911169ddaaf146aff539f58c26c489af3b892dff0fe283c1c264c65ae5aa59a2"
	if got := DigestIDs([]string{"b", "a"}); got != want {
		t.Fatalf("DigestIDs = %s, want %s", got, want)
	}
}

// TestPlanChunk: a chunk's plan has Plan's result and refusals, and one
// message.discard event (subject the operation, last) naming every change
// by its previous status, sorted, with their count and digest.
func TestPlanChunk(t *testing.T) {
	d := Discard{Reason: "incident", Actor: "bob"}
	sel := []Selected{
		{ID: "01C", Status: StatusQuarantined, Found: true},
		{ID: "01A", Status: StatusQuarantined, Found: true},
		{ID: "01B", Status: StatusRefailed, Found: true},
		{ID: "01D", Status: StatusDiscarded, Found: true},
		{ID: "01E", Status: StatusReplaying, Found: true, HeldBy: "batch"},
	}
	want, perMessage, err := d.Plan(sel)
	if err != nil {
		t.Fatal(err)
	}
	res, events, err := d.PlanChunk("OP", sel)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Changed, want.Changed) || len(res.Skipped) != len(want.Skipped) {
		t.Fatalf("PlanChunk result %+v, Plan's %+v", res, want)
	}
	if len(perMessage) != 4 || len(events) != 2 || events[0].Action != ActionDiscardRefused || events[0].Subject != "01E" {
		t.Fatalf("events %+v, want the refusal then one chunk event", events)
	}
	ev := events[1]
	c, ok := ParseDiscardChunk(*ev)
	if !ok || ev.Subject != "OP" || ev.Actor != "bob" || c.Reason != "incident" || c.Count != 3 {
		t.Fatalf("chunk event %+v (%+v, %v)", ev, c, ok)
	}
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.PreviousStatus[StatusQuarantined], []string{"01A", "01C"}) || !slices.Equal(c.PreviousStatus[StatusRefailed], []string{"01B"}) ||
		len(c.PreviousStatus) != 2 || !slices.Equal(c.IDs(), []string{"01A", "01B", "01C"}) {
		t.Fatalf("previous_status %v", c.PreviousStatus)
	}
	var raw map[string]any
	if err := json.Unmarshal(ev.Details, &raw); err != nil || len(raw) != 5 {
		t.Fatalf("details %s: want operation, reason, count, ids_sha256, previous_status", ev.Details)
	}
	c.PreviousStatus[StatusRefailed] = []string{"01X"}
	if c.Check() == nil {
		t.Fatal("Check accepted ids that are not the digest's")
	}
	// Nothing changed: no chunk event.
	if _, events, _ := d.PlanChunk("OP", sel[3:4]); len(events) != 0 {
		t.Fatalf("events of a chunk that changed nothing: %+v", events)
	}
	// A per-message event is no chunk event.
	if _, ok := ParseDiscardChunk(*perMessage[0]); ok {
		t.Fatal("ParseDiscardChunk took a per-message event")
	}
}

package api_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
)

func TestReplayItemsPaging(t *testing.T) {
	t.Parallel()
	e := newReplayEnv(t)
	var ids []string
	for i := range 7 {
		ids = append(ids, e.ingestOne("billing", "charge", strconv.Itoa(i)))
	}
	if _, err := e.store.Discard(t.Context(), quarantine.Discard{IDs: ids[6:], Reason: "gone", Actor: "test"}); err != nil {
		t.Fatal(err)
	}
	id := e.createReplay(e.operator, map[string]any{"ids": ids, "reason": "page", "dry_run": true}).Replay.ID
	var seen []string
	cursor := ""
	for pages := 0; ; pages++ {
		var p struct {
			Items      []quarantine.ReplayItem
			NextCursor *string `json:"next_cursor"`
		}
		e.get("/api/v1/replays/"+id+"/items?limit=3"+cursor, e.viewer).want(t, http.StatusOK).decode(t, &p)
		for _, it := range p.Items {
			seen = append(seen, it.MessageID)
		}
		if p.NextCursor == nil {
			if pages != 2 {
				t.Fatalf("%d pages of 3 for 7 items", pages+1)
			}
			break
		}
		cursor = "&cursor=" + *p.NextCursor
	}
	if !slices.Equal(seen, ids) {
		t.Fatalf("paged %v, want %v", seen, ids)
	}
	var p struct{ Items []quarantine.ReplayItem }
	e.get("/api/v1/replays/"+id+"/items?outcome=skipped", e.viewer).want(t, http.StatusOK).decode(t, &p)
	if len(p.Items) != 1 || p.Items[0].MessageID != ids[6] || p.Items[0].Reason == "" {
		t.Fatalf("skipped %+v", p.Items)
	}
	for _, q := range []struct{ query, field string }{
		{"?cursor=nope", "cursor"}, {"?cursor=" + "c2VxOi0x", "cursor"}, {"?outcome=gone", "outcome"},
		{"?limit=0", "limit"}, {"?limit=1001", "limit"}, {"?seq=1", "seq"},
	} {
		e.get("/api/v1/replays/"+id+"/items"+q.query, e.viewer).problem(t, http.StatusBadRequest, q.field)
	}
	e.get("/api/v1/replays/"+quarantine.NewID(time.Now())+"/items", e.viewer).problem(t, http.StatusNotFound, "id")
}

func TestReplayReport(t *testing.T) {
	t.Parallel()
	e := newReplayEnv(t)
	ids := []string{e.ingestOne("billing", "charge", `1`), e.ingestOne("orders.x", "ship", `2`)}
	id := e.createReplay(e.operator, map[string]any{"ids": ids, "reason": "report me"}).Replay.ID
	e.act(id, "cancel", e.operator, "done", http.StatusOK)
	r := e.get("/api/v1/replays/"+id+"/report", e.viewer).want(t, http.StatusOK)
	if ct := r.header.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Fatalf("content type %q", ct)
	}
	lines := bytes.Split(bytes.TrimSuffix(r.body, []byte("\n")), []byte("\n"))
	if len(lines) != 3 {
		t.Fatalf("%d lines, want a batch and 2 items:\n%s", len(lines), r.body)
	}
	var head struct {
		Type            string
		ID              string
		State           quarantine.ReplayState
		Reason, Actor   string
		Total           int
		Counts          map[quarantine.ItemOutcome]int
		DurationSeconds *float64 `json:"duration_seconds"`
	}
	if err := json.Unmarshal(lines[0], &head); err != nil {
		t.Fatal(err)
	}
	if head.Type != "batch" || head.ID != id || head.State != quarantine.ReplayCancelled || head.Reason != "report me" ||
		head.Actor != "token:operator" || head.Total != 2 || head.Counts[quarantine.ItemSkipped] != 2 || head.DurationSeconds == nil {
		t.Fatalf("head %s", lines[0])
	}
	for i, line := range lines[1:] {
		var it struct {
			Type string
			quarantine.ReplayItem
		}
		if err := json.Unmarshal(line, &it); err != nil {
			t.Fatal(err)
		}
		if it.Type != "item" || it.Seq != i || it.MessageID != ids[i] || it.BatchID != id || it.Outcome != quarantine.ItemSkipped {
			t.Fatalf("line %d: %s", i+2, line)
		}
	}
	e.get("/api/v1/replays/"+id+"/report?x=1", e.viewer).problem(t, http.StatusBadRequest, "x")
	e.get("/api/v1/replays/nope/report", e.viewer).problem(t, http.StatusNotFound, "id")
}

func TestReplayList(t *testing.T) {
	t.Parallel()
	e := newReplayEnv(t)
	a := e.createReplay(e.operator, map[string]any{"ids": []string{e.ingestOne("billing", "charge", `1`)}, "reason": "1", "dry_run": true}).Replay.ID
	b := e.createReplay(e.admin, map[string]any{"ids": []string{e.ingestOne("orders.x", "ship", `2`)}, "reason": "2"}).Replay.ID
	type page struct {
		Items      []replayBatch
		NextCursor *string `json:"next_cursor"`
	}
	list := func(query string) (ids []string, next *string) {
		var p page
		e.get("/api/v1/replays"+query, e.viewer).want(t, http.StatusOK).decode(t, &p)
		for _, it := range p.Items {
			ids = append(ids, it.ID)
		}
		return ids, p.NextCursor
	}
	if got, _ := list(""); !slices.Equal(got, []string{b, a}) {
		t.Fatalf("newest first: %v, want %v", got, []string{b, a})
	}
	if got, _ := list("?state=draft"); !slices.Equal(got, []string{a}) {
		t.Fatalf("drafts %v", got)
	}
	if got, _ := list("?state=draft&state=running"); len(got) != 2 {
		t.Fatalf("drafts and running %v", got)
	}
	if got, _ := list("?actor=token:admin"); !slices.Equal(got, []string{b}) {
		t.Fatalf("by admin %v", got)
	}
	if got, _ := list("?queue=billing"); !slices.Equal(got, []string{a}) {
		t.Fatalf("billing %v", got)
	}
	got, next := list("?limit=1")
	if !slices.Equal(got, []string{b}) || next == nil {
		t.Fatalf("first page %v next %v", got, next)
	}
	if got, next = list("?limit=1&cursor=" + *next); !slices.Equal(got, []string{a}) || next != nil {
		t.Fatalf("second page %v next %v", got, next)
	}
	for _, q := range []struct{ query, field string }{
		{"?state=gone", "state"}, {"?cursor=nope", "cursor"}, {"?limit=0", "limit"}, {"?actor=a&actor=b", "actor"}, {"?owner=x", "owner"},
	} {
		e.get("/api/v1/replays"+q.query, e.viewer).problem(t, http.StatusBadRequest, q.field)
	}
}

func TestReplayOwners(t *testing.T) {
	t.Parallel()
	e := newReplayEnv(t)
	bill, ord := e.ingestOne("billing", "charge", `1`), e.ingestOne("orders.x", "ship", `2`)
	ops := e.token("payments-ops", quarantine.RoleOperator, "payments")
	view := e.token("payments-view", quarantine.RoleViewer, "payments")
	// An id of another team is skipped as not found, and audited.
	c := e.createReplay(ops, map[string]any{"ids": []string{bill, ord}, "reason": "scoped", "dry_run": true})
	if c.Replay.Counts[quarantine.ItemPending] != 1 || c.Replay.Counts[quarantine.ItemSkipped] != 1 || !slices.Equal(c.Replay.Owners, []string{"payments"}) {
		t.Fatalf("scoped batch %+v", c.Replay)
	}
	if len(c.Items) != 2 || c.Items[1].MessageID != ord || c.Items[1].Outcome != quarantine.ItemSkipped {
		t.Fatalf("scoped items %+v", c.Items)
	}
	if den := e.deniedTo("payments-ops"); len(den) != 1 {
		t.Fatalf("denials %+v", den)
	}
	// A filter reaches only the token's owners.
	f := e.createReplay(ops, map[string]any{"filter": map[string]any{"job_name": []string{"charge", "ship"}}, "reason": "f", "dry_run": true})
	if f.Replay.Total != 1 || f.Items[0].MessageID != bill {
		t.Fatalf("scoped filter %+v", f)
	}
	// A batch of orders only is invisible: 404 to read, 404 (audited) to act.
	theirs := e.createReplay(e.admin, map[string]any{"ids": []string{ord}, "reason": "orders", "dry_run": true}).Replay.ID
	e.get("/api/v1/replays/"+theirs, view).problem(t, http.StatusNotFound, "id")
	e.get("/api/v1/replays/"+theirs+"/items", ops).problem(t, http.StatusNotFound, "id")
	e.get("/api/v1/replays/"+theirs+"/report", ops).problem(t, http.StatusNotFound, "id")
	e.json(http.MethodPost, "/api/v1/replays/"+theirs+"/cancel", ops, map[string]any{"reason": "mine?"}).problem(t, http.StatusNotFound, "id")
	if den := e.deniedTo("payments-ops"); len(den) != 2 || den[1].Subject != theirs {
		t.Fatalf("denials %+v", den)
	}
	// A batch of both teams is visible, but only a token of both may act on it.
	both := e.createReplay(e.admin, map[string]any{"ids": []string{bill, ord}, "reason": "both", "dry_run": true}).Replay.ID
	e.replay(both, view)
	e.json(http.MethodPost, "/api/v1/replays/"+both+"/start", ops, map[string]any{"reason": "go"}).problem(t, http.StatusForbidden, "")
	if den := e.deniedTo("payments-ops"); len(den) != 3 {
		t.Fatalf("denials %+v", den)
	}
	// The list holds the batches touching the token's owners.
	var p struct{ Items []replayBatch }
	e.get("/api/v1/replays", view).want(t, http.StatusOK).decode(t, &p)
	var listed []string
	for _, b := range p.Items {
		listed = append(listed, b.ID)
	}
	if want := []string{both, f.Replay.ID, c.Replay.ID}; !slices.Equal(listed, want) {
		t.Fatalf("payments sees %v, want %v", listed, want)
	}
	// Its own batch, the scoped operator may act on.
	if b := e.act(c.Replay.ID, "cancel", ops, "not needed", http.StatusOK); b.State != quarantine.ReplayCancelled {
		t.Fatalf("own cancel %+v", b)
	}
}

package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/api"
	"github.com/quarantine-dev/quarantine/internal/rules"
)

// replayDefaults are the replay settings of the replay tests' servers.
var replayDefaults = rules.ReplayDefaults{
	Rate: 10, MaxRate: 100, Canary: 0, Observe: 30 * time.Second, HaltRefailRatio: 0.2,
	DraftTTL: time.Hour, Collectors: []string{"orders-rmq", "billing-sqs"},
}

func withReplay(d rules.ReplayDefaults) envOpt { return func(c *api.Config) { c.Replay = d } }

// newReplayEnv is a server with replayDefaults.
func newReplayEnv(t *testing.T) *env {
	t.Helper()
	return newEnv(t, withReplay(replayDefaults))
}

// replayBatch is a batch as the API shows it.
type replayBatch struct {
	quarantine.ReplayBatch
	Observe      string   `json:"observe"`
	AchievedRate *float64 `json:"achieved_rate"`
	ETASeconds   *float64 `json:"eta_seconds"`
}

// replayCreated is the answer to POST /api/v1/replays.
type replayCreated struct {
	Replay           replayBatch             `json:"replay"`
	Items            []quarantine.ReplayItem `json:"items"`
	NextCursor       *string                 `json:"next_cursor"`
	EstimatedSeconds float64                 `json:"estimated_seconds"`
}

// createReplay posts body and wants 201.
func (e *env) createReplay(secret string, body any) replayCreated {
	e.t.Helper()
	r := e.json(http.MethodPost, "/api/v1/replays", secret, body).want(e.t, http.StatusCreated)
	var c replayCreated
	r.decode(e.t, &c)
	if loc := r.header.Get("Location"); loc != "/api/v1/replays/"+c.Replay.ID {
		e.t.Fatalf("Location %q for batch %s", loc, c.Replay.ID)
	}
	return c
}

func (e *env) replay(id, secret string) replayBatch {
	e.t.Helper()
	var b replayBatch
	e.get("/api/v1/replays/"+id, secret).want(e.t, http.StatusOK).decode(e.t, &b)
	return b
}

// act posts an action with a reason and wants status; it returns the
// batch when the status is 200.
func (e *env) act(id, action, secret, reason string, status int) replayBatch {
	e.t.Helper()
	r := e.json(http.MethodPost, "/api/v1/replays/"+id+"/"+action, secret, map[string]any{"reason": reason}).want(e.t, status)
	var b replayBatch
	if status == http.StatusOK {
		r.decode(e.t, &b)
	}
	return b
}

// auditOf returns the events with action about subject.
func (e *env) auditOf(subject, action string) []auditEvent {
	e.t.Helper()
	var page struct{ Items []auditEvent }
	e.get("/api/v1/audit?limit=1000&subject="+subject+"&action="+action, e.admin).want(e.t, http.StatusOK).decode(e.t, &page)
	return page.Items
}

func detailsOf(t *testing.T, ev auditEvent) map[string]any {
	t.Helper()
	var d map[string]any
	if err := json.Unmarshal(ev.Details, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestReplayCreateByIDs(t *testing.T) {
	t.Parallel()
	e := newReplayEnv(t)
	a, b := e.ingestOne("billing", "charge", `{"a":1}`), e.ingestOne("billing", "charge", `{"a":2}`)
	other := e.ingestOne("billing", "charge", `{"a":3}`)
	c := e.createReplay(e.operator, map[string]any{"ids": []string{b, a, b}, "expect_count": 2, "reason": "the API is back"})
	got := c.Replay
	if got.State != quarantine.ReplayRunning || got.Total != 2 || got.Counts[quarantine.ItemPending] != 2 || got.Actor != "token:operator" ||
		got.Reason != "the API is back" || got.Rate != 10 || got.Observe != "30s" || got.HaltRefailRatio != 0.2 || got.StartedAt == nil {
		t.Fatalf("created %+v", got)
	}
	if c.Items != nil || c.EstimatedSeconds != 0.2 {
		t.Fatalf("a started batch answers no items and its estimate: %+v", c)
	}
	// A pin moves no message.
	if m := e.message(a, e.viewer); m.Status != quarantine.StatusQuarantined {
		t.Fatalf("a pinned message became %s before its lease", m.Status)
	}
	if ls, err := e.store.LeaseReplayItems(t.Context(), got.ID, "engine", 10, time.Minute, 0); err != nil || len(ls) != 2 {
		t.Fatalf("lease: %v, %d leases", err, len(ls))
	}
	// Nor does a lease: the items hold their messages in flight, and the
	// record of each outcome moves its message once.
	for _, id := range []string{a, b} {
		if m := e.message(id, e.viewer); m.Status != quarantine.StatusQuarantined {
			t.Fatalf("message %s is %s, want quarantined until its outcome is recorded", id, m.Status)
		}
	}
	if m := e.message(other, e.viewer); m.Status != quarantine.StatusQuarantined {
		t.Fatalf("an unselected message became %s", m.Status)
	}
	// Nothing publishes in these tests: the batch stays running, pending.
	one := e.replay(got.ID, e.viewer)
	if one.State != quarantine.ReplayRunning || one.AchievedRate == nil || *one.AchievedRate != 0 || one.ETASeconds == nil || *one.ETASeconds != 0.2 {
		t.Fatalf("GET %+v", one)
	}
	var items struct{ Items []quarantine.ReplayItem }
	e.get("/api/v1/replays/"+got.ID+"/items", e.viewer).want(t, http.StatusOK).decode(t, &items)
	if len(items.Items) != 2 || items.Items[0].MessageID != b || items.Items[1].MessageID != a || items.Items[0].Seq != 0 {
		t.Fatalf("items in the order given, duplicates dropped: %+v", items.Items)
	}
	if ev := e.auditOf(got.ID, quarantine.ActionReplayCreate); len(ev) != 1 || ev[0].Actor != "token:operator" || detailsOf(t, ev[0])["reason"] != "the API is back" {
		t.Fatalf("replay.create %+v", ev)
	}
	if ev := e.auditOf(got.ID, quarantine.ActionReplayStart); len(ev) != 1 {
		t.Fatalf("replay.start %+v", ev)
	}
	// expect_count counts the messages found.
	e.json(http.MethodPost, "/api/v1/replays", e.operator, map[string]any{"ids": []string{a}, "expect_count": 2, "reason": "r"}).
		problem(t, http.StatusConflict, "/expect_count")
	// A message the first batch holds in flight may be pinned again: the
	// second batch's lease skips it, naming the first.
	c = e.createReplay(e.operator, map[string]any{"ids": []string{a, other}, "reason": "again"})
	if c.Replay.Counts[quarantine.ItemPending] != 2 {
		t.Fatalf("second batch counts %+v", c.Replay.Counts)
	}
	if ls, err := e.store.LeaseReplayItems(t.Context(), c.Replay.ID, "engine", 10, time.Minute, 0); err != nil || len(ls) != 1 || ls[0].Item.MessageID != other {
		t.Fatalf("the second batch's lease: %v, %d leases; want other's alone", err, len(ls))
	}
	e.get("/api/v1/replays/"+c.Replay.ID+"/items", e.viewer).want(t, http.StatusOK).decode(t, &items)
	for _, it := range items.Items {
		if it.MessageID == a && (it.Outcome != quarantine.ItemSkipped || it.Reason != "replayed by batch "+got.ID) {
			t.Fatalf("the second batch's item of a message held by the first: %+v", it)
		}
	}
}

func TestReplayDryRunByFilter(t *testing.T) {
	t.Parallel()
	e := newReplayEnv(t)
	for i := range 3 {
		e.ingestOne("billing", "charge", strconv.Itoa(i))
	}
	e.ingestOne("billing", "other-job", `{"x":1}`)
	fp := e.message(e.ingestOne("orders.x", "charge", `{"n":0}`), e.viewer).Fingerprint
	// The fingerprint filters the list too: the same job and failure in two queues.
	n := e.count(e.viewer, "&fingerprint="+fp)
	if n != 4 || e.count(e.viewer, "") != 5 {
		t.Fatalf("fingerprint %s lists %d messages, want 4", fp, n)
	}
	filter := map[string]any{"fingerprint": []string{fp}, "status": []string{"quarantined"}}
	e.json(http.MethodPost, "/api/v1/replays", e.operator, map[string]any{"filter": filter, "expect_count": n + 1, "reason": "r", "dry_run": true}).
		problem(t, http.StatusConflict, "/expect_count")
	c := e.createReplay(e.operator, map[string]any{"filter": filter, "expect_count": n, "reason": "preview", "dry_run": true,
		"rate": 4, "canary": 2, "observe": "1m"})
	d := c.Replay
	if d.State != quarantine.ReplayDraft || d.Total != n || d.ExpiresAt == nil || d.StartedAt != nil || d.Canary != 2 || d.Observe != "1m0s" {
		t.Fatalf("draft %+v", d)
	}
	want := float64(d.Counts[quarantine.ItemPending])/4 + 60
	if c.EstimatedSeconds != want || len(c.Items) != min(n, 50) {
		t.Fatalf("estimate %v, want %v; %d items", c.EstimatedSeconds, want, len(c.Items))
	}
	if (n > 50) != (c.NextCursor != nil) {
		t.Fatalf("next_cursor %v with %d items", c.NextCursor, n)
	}
	for _, it := range c.Items {
		if m := e.message(it.MessageID, e.viewer); m.Status != quarantine.StatusQuarantined || m.Fingerprint != fp {
			t.Fatalf("a dry run changed %s to %s (fingerprint %s)", it.MessageID, m.Status, m.Fingerprint)
		}
	}
	if d := e.replay(d.ID, e.viewer); d.AchievedRate != nil || d.ETASeconds == nil || *d.ETASeconds != want {
		t.Fatalf("draft GET %+v", d)
	}
	// Start it, with a reason.
	started := e.act(d.ID, "start", e.operator, "previewed, go", http.StatusOK)
	if started.State != quarantine.ReplayRunning || started.StartedAt == nil {
		t.Fatalf("started %+v", started)
	}
	if ls, err := e.store.LeaseReplayItems(t.Context(), d.ID, "engine", 1, time.Minute, 0); err != nil || len(ls) != 1 {
		t.Fatalf("lease: %v, %d leases", err, len(ls))
	}
	if m := e.message(c.Items[0].MessageID, e.viewer); m.Status != quarantine.StatusQuarantined {
		t.Fatalf("leased message is %s, want quarantined until its outcome is recorded", m.Status)
	}
	ev := e.auditOf(d.ID, quarantine.ActionReplayStart)
	if len(ev) != 1 || ev[0].Actor != "token:operator" || detailsOf(t, ev[0])["reason"] != "previewed, go" {
		t.Fatalf("replay.start %+v", ev)
	}
	e.act(d.ID, "start", e.operator, "twice", http.StatusConflict)
	// An empty filter needs expect_count.
	e.json(http.MethodPost, "/api/v1/replays", e.operator, map[string]any{"filter": map[string]any{}, "reason": "r"}).
		problem(t, http.StatusBadRequest, "/filter")
}

func TestReplayPauseResumeCancel(t *testing.T) {
	t.Parallel()
	e := newReplayEnv(t)
	ids := []string{e.ingestOne("billing", "charge", `1`), e.ingestOne("billing", "charge", `2`)}
	id := e.createReplay(e.operator, map[string]any{"ids": ids, "reason": "go"}).Replay.ID
	steps := []struct {
		action, reason string
		state          quarantine.ReplayState
		audit          string
	}{
		{"pause", "downstream is slow", quarantine.ReplayPaused, quarantine.ActionReplayPause},
		{"resume", "downstream recovered", quarantine.ReplayRunning, quarantine.ActionReplayResume},
		{"cancel", "wrong set", quarantine.ReplayCancelled, quarantine.ActionReplayCancel},
	}
	for _, s := range steps {
		b := e.act(id, s.action, e.operator, s.reason, http.StatusOK)
		if b.State != s.state || b.StateReason != s.reason {
			t.Fatalf("%s: %+v", s.action, b)
		}
		ev := e.auditOf(id, s.audit)
		if len(ev) != 1 || ev[0].Actor != "token:operator" || detailsOf(t, ev[0])["reason"] != s.reason {
			t.Fatalf("%s audit %+v", s.audit, ev)
		}
	}
	b := e.replay(id, e.viewer)
	if b.Counts[quarantine.ItemSkipped] != 2 || b.Counts[quarantine.ItemPending] != 0 || b.ETASeconds != nil || b.FinishedAt == nil {
		t.Fatalf("cancelled %+v", b)
	}
	for _, m := range ids {
		if st := e.message(m, e.viewer).Status; st != quarantine.StatusQuarantined {
			t.Fatalf("after cancel %s is %s", m, st)
		}
	}
	for _, a := range []string{"pause", "resume", "cancel", "start"} {
		e.act(id, a, e.operator, "too late", http.StatusConflict)
	}
	// Viewers read but do not act.
	e.act(id, "pause", e.viewer, "no", http.StatusForbidden)
}

// The list answers the achieved rate GET of one batch answers: published
// per second while publishing, a pause excluded. The batch published 1 of
// its 2 messages at 1 msg/s, then was paused for ten minutes: 1, not the
// 0.0 of the whole time since its start.
func TestReplayListAchievedRateExcludesPauses(t *testing.T) {
	t.Parallel()
	now := time.Now().Add(10 * time.Minute)
	e := newEnv(t, withNow(func() time.Time { return now }))
	ctx := t.Context()
	var msgs []*quarantine.Message
	for i := range 2 {
		m := &quarantine.Message{Queue: "orders.eu", JobName: "charge", IdempotencyKey: fmt.Sprintf("order:%d", i), Source: "test",
			DedupeKey: fmt.Sprintf("list-rate-%d", i), Owner: "orders", ContentType: "application/json", Payload: []byte(`{}`), Reason: "declined"}
		m.Normalize(time.Now())
		msgs = append(msgs, m)
	}
	ins, err := e.store.InsertBatch(ctx, msgs)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range ins {
		ids = append(ids, r.ID)
	}
	b, err := e.store.CreateReplay(ctx, quarantine.ReplayRequest{IDs: ids, Rate: 1, Reason: "fixed", Actor: "token:operator"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ls, err := e.store.LeaseReplayItems(ctx, b.ID, "engine", 1, time.Minute, 0)
	if err != nil || len(ls) != 1 {
		t.Fatalf("lease: %v %v", ls, err)
	}
	if _, err := e.store.RecordReplayResults(ctx, []quarantine.ReplayResult{{BatchID: b.ID, MessageID: ls[0].Item.MessageID, Fence: ls[0].Fence,
		Outcome: quarantine.ItemPublished, Destination: "memory:test/orders", PayloadVersion: ls[0].Message.PayloadVersion,
		PayloadSHA256: ls[0].Message.PayloadSHA256, At: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.ChangeReplay(ctx, quarantine.ReplayChange{BatchID: b.ID, Action: quarantine.ReplayActPause, Actor: "token:operator", Reason: "downstream slow"}); err != nil {
		t.Fatal(err)
	}
	if one := e.replay(b.ID, e.viewer); one.AchievedRate == nil || *one.AchievedRate != 1 {
		t.Fatalf("GET of the batch: achieved rate %v, want 1", one.AchievedRate)
	}
	var page struct{ Items []replayBatch }
	e.get("/api/v1/replays", e.viewer).want(t, http.StatusOK).decode(t, &page)
	if len(page.Items) != 1 || page.Items[0].AchievedRate == nil || *page.Items[0].AchievedRate != 1 {
		t.Fatalf("the list: %+v, want the batch at 1 msg/s", page.Items)
	}
}

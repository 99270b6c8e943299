package api_test

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
)

func TestReplayRefusals(t *testing.T) {
	t.Parallel()
	e := newReplayEnv(t)
	id := e.ingestOne("billing", "charge", `1`)
	ids := `"ids":["` + id + `"]`
	for _, tc := range []struct {
		body   string
		status int
		field  string
	}{
		{`{` + ids + `}`, 422, "/reason"},
		{`{` + ids + `,"reason":"  "}`, 422, "/reason"},
		{`{"reason":"r"}`, 400, "/ids"},
		{`{"reason":"r","ids":[]}`, 400, "/ids"},
		{`{"reason":"r","ids":["nope"]}`, 400, "/ids/0"},
		{`{"reason":"r","ids":"` + id + `"}`, 400, "/ids"},
		{`{` + ids + `,"reason":"r","filter":{"queue":["a"]}}`, 400, "/filter"},
		{`{"reason":"r","filter":{}}`, 400, "/filter"},
		{`{"reason":"r","filter":{"qeue":["a"]}}`, 400, "/filter/qeue"},
		{`{"reason":"r","filter":{"fingerprint":"abc"}}`, 400, "/filter/fingerprint"},
		{`{"reason":"r","filter":{"status":["gone"]}}`, 400, "/filter/status/0"},
		{`{` + ids + `,"reason":"r","expect_count":-1}`, 400, "/expect_count"},
		{`{` + ids + `,"reason":"r","rate":0}`, 400, "/rate"},
		{`{` + ids + `,"reason":"r","rate":-3}`, 400, "/rate"},
		{`{` + ids + `,"reason":"r","rate":"fast"}`, 400, "/rate"},
		{`{` + ids + `,"reason":"r","rate":100.5}`, 422, "/rate"},
		{`{` + ids + `,"reason":"r","burst":-1}`, 400, "/burst"},
		{`{` + ids + `,"reason":"r","canary":-1}`, 400, "/canary"},
		{`{` + ids + `,"reason":"r","observe":"soon"}`, 400, "/observe"},
		{`{` + ids + `,"reason":"r","observe":30}`, 400, "/observe"},
		{`{` + ids + `,"reason":"r","observe":"2h"}`, 400, "/observe"},
		{`{` + ids + `,"reason":"r","observe":"-1s"}`, 400, "/observe"},
		{`{` + ids + `,"reason":"r","halt_refail_ratio":1.5}`, 400, "/halt_refail_ratio"},
		{`{` + ids + `,"reason":"r","destination":{"collector":"nope"}}`, 422, "/destination/collector"},
		{`{` + ids + `,"reason":"r","destination":{"collector":" orders-rmq"}}`, 400, "/destination/collector"},
		{`{` + ids + `,"reason":"r","destination":{"queue":"a\nb"}}`, 400, "/destination/queue"},
		{`{` + ids + `,"reason":"r","destination":{"qeue":"a"}}`, 400, "/destination/qeue"},
		{`{` + ids + `,"reason":"r","destination":"orders"}`, 400, "/destination"},
		{`{` + ids + `,"reason":"r","dry_run":"yes"}`, 400, "/dry_run"},
		{`{` + ids + `,"reason":"r","speed":1}`, 400, "/speed"},
		{`{` + ids + `,"reason":"r","reason":"s"}`, 400, "/reason"},
		{``, 400, ""},
		{`[]`, 400, ""},
	} {
		e.json(http.MethodPost, "/api/v1/replays", e.operator, []byte(tc.body)).problem(t, tc.status, tc.field)
	}
	if m := e.message(id, e.viewer); m.Status != quarantine.StatusQuarantined {
		t.Fatalf("a refused replay changed the status to %s", m.Status)
	}
	// Viewers may not create.
	e.json(http.MethodPost, "/api/v1/replays", e.viewer, []byte(`{`+ids+`,"reason":"r"}`)).problem(t, http.StatusForbidden, "")
	if den := e.deniedTo("viewer"); len(den) != 1 {
		t.Fatalf("denials %+v", den)
	}
	// The actions check their bodies before the batch.
	unknown := quarantine.NewID(time.Now())
	for _, tc := range []struct {
		target, body string
		status       int
		field        string
	}{
		{"/api/v1/replays/" + unknown + "/pause", `{}`, 422, "/reason"},
		{"/api/v1/replays/" + unknown + "/pause", `{"reason":"r","force":true}`, 400, "/force"},
		{"/api/v1/replays/" + unknown + "/cancel", ``, 400, ""},
		{"/api/v1/replays/" + unknown + "/resume", `{"reason":"r"}`, 404, "id"},
		{"/api/v1/replays/nope/start", `{"reason":"r","force":true}`, 404, "id"},
		{"/api/v1/replays/" + unknown + "/start", `{"reason":"r","accept_key_rule_change":1}`, 400, "/accept_key_rule_change"},
	} {
		e.json(http.MethodPost, tc.target, e.operator, []byte(tc.body)).problem(t, tc.status, tc.field)
	}
	e.get("/api/v1/replays/"+unknown, e.viewer).problem(t, http.StatusNotFound, "id")
	e.get("/api/v1/replays/"+unknown+"?x=1", e.viewer).problem(t, http.StatusBadRequest, "x")
}

// TestReplayConfiguredDefaults checks that an absent member takes the
// configured default and a given one overrides it.
func TestReplayConfiguredDefaults(t *testing.T) {
	t.Parallel()
	d := replayDefaults
	d.Rate, d.Canary, d.Observe, d.HaltRefailRatio = 5, 3, 10*time.Second, 0.5
	e := newEnv(t, withReplay(d))
	ids := []string{e.ingestOne("billing", "charge", `1`), e.ingestOne("billing", "charge", `2`)}
	// Larger than its canary, so that the batch has one (and observes it).
	more := append(slices.Clone(ids), e.ingestOne("billing", "charge", `3`), e.ingestOne("billing", "charge", `4`))
	c := e.createReplay(e.operator, map[string]any{"ids": more, "reason": "defaults", "dry_run": true})
	b := c.Replay
	if b.Rate != 5 || b.Canary != 3 || b.Observe != "10s" || b.HaltRefailRatio != 0.5 || b.Burst != 1 || c.EstimatedSeconds != 10.8 {
		t.Fatalf("defaults %+v, estimate %v", b, c.EstimatedSeconds)
	}
	c = e.createReplay(e.operator, map[string]any{"ids": ids, "reason": "given", "dry_run": true, "rate": 50, "burst": 7, "canary": 0,
		"observe": "0s", "halt_refail_ratio": 0, "destination": map[string]any{"queue": "payments.retry", "collector": "billing-sqs"}})
	b = c.Replay
	if b.Rate != 50 || b.Burst != 7 || b.Canary != 0 || b.Observe != "0s" || b.HaltRefailRatio != 0 ||
		b.Destination != (quarantine.ReplayDestination{Queue: "payments.retry", Collector: "billing-sqs"}) || c.EstimatedSeconds != 0 {
		t.Fatalf("given %+v, estimate %v", b, c.EstimatedSeconds)
	}
	// Without configured collectors, any collector is unknown.
	e2 := newEnv(t)
	e2.json(http.MethodPost, "/api/v1/replays", e2.operator, map[string]any{"ids": []string{e2.ingestOne("billing", "x", `1`)},
		"reason": "r", "destination": map[string]any{"collector": "orders-rmq"}}).problem(t, http.StatusUnprocessableEntity, "/destination/collector")
}

// TestFingerprintFilter checks the fingerprint filter wherever a message
// filter is read: the list, groups, queues, sample and bulk discard.
func TestFingerprintFilter(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.ingestOne("billing", "charge", `1`)
	e.ingestOne("orders.x", "charge", `2`)
	e.ingestOne("billing", "refund", `3`)
	fp := e.message(a, e.viewer).Fingerprint
	if n := e.count(e.viewer, "&fingerprint="+fp); n != 2 {
		t.Fatalf("list: %d, want 2", n)
	}
	if n := e.count(e.viewer, "&fingerprint="+fp+"&fingerprint=nope"); n != 2 {
		t.Fatalf("list of two fingerprints: %d, want 2", n)
	}
	var groups struct {
		Items []struct{ Fingerprint string }
	}
	e.get("/api/v1/groups?fingerprint="+fp, e.viewer).want(t, http.StatusOK).decode(t, &groups)
	if len(groups.Items) != 1 || groups.Items[0].Fingerprint != fp {
		t.Fatalf("groups %+v", groups.Items)
	}
	var queues struct{ Items []struct{ Queue string } }
	e.get("/api/v1/queues?fingerprint="+fp, e.viewer).want(t, http.StatusOK).decode(t, &queues)
	if len(queues.Items) != 2 {
		t.Fatalf("queues %+v", queues.Items)
	}
	var sample struct{ Items []message }
	e.json(http.MethodPost, "/api/v1/messages/sample", e.viewer, map[string]any{"filter": map[string]any{"fingerprint": []string{fp}}, "size": 10}).
		want(t, http.StatusOK).decode(t, &sample)
	if len(sample.Items) != 2 || sample.Items[0].Fingerprint != fp || sample.Items[1].Fingerprint != fp {
		t.Fatalf("sample %+v", sample.Items)
	}
	res := e.discardMany(e.operator, map[string]any{"filter": map[string]any{"fingerprint": []string{fp}}, "expect_count": 2, "reason": "group"})
	if len(res.Changed) != 2 {
		t.Fatalf("discard by fingerprint %+v", res)
	}
	e.get("/api/v1/messages?fingerprint="+strings.Repeat("x", 1025), e.viewer).problem(t, http.StatusBadRequest, "fingerprint")
}

// TestReplayConfirmAbove: above bulk.confirm_above, a replay by filter
// started at once needs expect_count (422 naming it); a dry run does not,
// and the count it previewed confirms.
func TestReplayConfirmAbove(t *testing.T) {
	t.Parallel()
	d := replayDefaults
	d.ConfirmAbove = 2
	e := newEnv(t, withReplay(d))
	for i := range 3 {
		e.ingestOne("billing", "charge", strconv.Itoa(i))
	}
	filter := map[string]any{"queue": []string{"billing"}}
	p := e.json(http.MethodPost, "/api/v1/replays", e.operator, map[string]any{"filter": filter, "reason": "r"}).
		problem(t, http.StatusUnprocessableEntity, "/expect_count")
	if !strings.Contains(p.Detail, "matches 3 messages") {
		t.Fatalf("the refusal does not name the count: %q", p.Detail)
	}
	e.json(http.MethodPost, "/api/v1/replays", e.operator, map[string]any{"filter": filter, "reason": "r", "expect_count": 2}).
		problem(t, http.StatusConflict, "/expect_count")
	draft := e.createReplay(e.operator, map[string]any{"filter": filter, "reason": "preview", "dry_run": true})
	if draft.Replay.State != quarantine.ReplayDraft || draft.Replay.Total != 3 {
		t.Fatalf("dry run %+v", draft.Replay)
	}
	c := e.createReplay(e.operator, map[string]any{"filter": filter, "reason": "go", "expect_count": draft.Replay.Total})
	if c.Replay.State != quarantine.ReplayRunning || c.Replay.Total != 3 {
		t.Fatalf("confirmed %+v", c.Replay)
	}
}

// TestReplayPinsInTheBackground: a selection larger than one chunk
// (2,000) answers 202 with the batch pinning; GET follows it until it is
// the draft, every message pinned.
func TestReplayPinsInTheBackground(t *testing.T) {
	t.Parallel()
	e := newReplayEnv(t)
	const n = 2500
	msgs := make([]*quarantine.Message, n)
	for i := range msgs {
		msgs[i] = &quarantine.Message{Source: "test", MessageID: "m" + strconv.Itoa(i), Queue: "bulk", JobName: "j", Owner: "payments",
			IdempotencyKey: "k" + strconv.Itoa(i), Payload: []byte(strconv.Itoa(i)), ContentType: "application/json"}
	}
	if _, err := e.store.InsertBatch(t.Context(), msgs); err != nil {
		t.Fatal(err)
	}
	var c replayCreated
	e.json(http.MethodPost, "/api/v1/replays", e.operator, map[string]any{"filter": map[string]any{"queue": []string{"bulk"}},
		"reason": "incident", "dry_run": true}).want(t, http.StatusAccepted).decode(t, &c)
	if c.Replay.State != quarantine.ReplayPinning || c.Replay.PinTotal != n || c.Replay.Total != 0 || c.Items != nil {
		t.Fatalf("accepted %+v", c.Replay)
	}
	deadline := time.Now().Add(time.Minute)
	b := e.replay(c.Replay.ID, e.viewer)
	for b.State == quarantine.ReplayPinning {
		if b.Total > n || time.Now().After(deadline) {
			t.Fatalf("pinning %d of %d", b.Total, b.PinTotal)
		}
		b = e.replay(c.Replay.ID, e.viewer)
	}
	if b.State != quarantine.ReplayDraft || b.Total != n || b.Counts[quarantine.ItemPending] != n || b.ExpiresAt == nil {
		t.Fatalf("pinned %+v", b)
	}
}

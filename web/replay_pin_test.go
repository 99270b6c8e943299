package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/rules"
	"github.com/quarantine-dev/quarantine/web"
)

// Above bulk.confirm_above the form asks the operator to type the count
// it shows: a missing or wrong number creates nothing.
func TestReplayFormAsksToTypeTheCount(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *web.Config) {
		c.Replay = rules.ReplayDefaults{Rate: 5, MaxRate: 100, ConfirmAbove: 2}
	})
	re := &replayEnv{env: e, c: e.client()}
	for i := range 3 {
		e.message(quarantine.Message{Queue: "orders", JobName: "charge", IdempotencyKey: "k" + strconv.Itoa(i), Payload: []byte(`{}`)})
	}
	e.login(re.c, e.token("op", quarantine.RoleOperator))
	body, v := re.newForm(re.c, "queue=orders")
	if !strings.Contains(body, `id="confirm_count"`) || !strings.Contains(body, "Type the number of messages, 3, to confirm") {
		t.Fatalf("the form does not ask for the count:\n%s", body)
	}
	for _, typed := range []string{"", "2", "three"} {
		w := url.Values{}
		for k, vs := range v {
			w[k] = vs
		}
		w.Set("confirm_count", typed)
		res, page := postForm(t, re.c, e.srv.URL+"/replays", w)
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(page, `id="confirm_count-error">Type 3, the number of messages shown, to confirm.`) {
			t.Fatalf("typed %q: %d\n%s", typed, res.StatusCode, page)
		}
	}
	if list, _, _ := e.store.ListReplays(context.Background(), quarantine.ReplayFilter{Limit: 10}); len(list) != 0 {
		t.Fatalf("an unconfirmed form created %d batches", len(list))
	}
	v.Set("confirm_count", "3")
	if b := re.dryRun(v); b.Total != 3 || b.State != quarantine.ReplayDraft {
		t.Fatalf("confirmed draft %+v", b)
	}
	// At or under the threshold the form does not ask.
	if body, _ := re.newForm(re.c, "queue=orders&job_name=nope"); strings.Contains(body, `id="confirm_count"`) {
		t.Fatal("the form asks to type the count of an empty selection")
	}
}

// While a large selection is pinned, its page shows a progress bar of the
// messages pinned with the pin's ETA, and its progress JSON follows it.
func TestReplayPageShowsThePin(t *testing.T) {
	t.Parallel()
	e := newReplayEnv(t)
	const n = 2100
	msgs := make([]*quarantine.Message, n)
	for i := range msgs {
		m := quarantine.Message{Source: "test", DedupeKey: "d" + strconv.Itoa(i), Owner: "team-a", Queue: "bulk",
			JobName: "j", IdempotencyKey: "k" + strconv.Itoa(i), Payload: []byte(`{}`), ContentType: "application/json"}
		m.Normalize(time.Now())
		msgs[i] = &m
	}
	if _, err := e.store.InsertBatch(t.Context(), msgs); err != nil {
		t.Fatal(err)
	}
	var page, progress string
	r := quarantine.ReplayRequest{Filter: &quarantine.Filter{Queue: []string{"bulk"}}, Rate: 5, DryRun: true, Reason: "incident",
		Actor: "token:op", OnPinning: func(b *quarantine.ReplayBatch) {
			_, page = get(t, e.c, e.srv.URL+"/replays/"+b.ID)
			_, progress = get(t, e.c, e.srv.URL+"/replays/"+b.ID+"/progress")
		}}
	b, err := e.store.CreateReplay(t.Context(), r, nil)
	if err != nil || b.State != quarantine.ReplayDraft || b.Total != n {
		t.Fatalf("CreateReplay = %+v, %v", b, err)
	}
	if !strings.Contains(page, `<progress id="pin-progress" max="2100" value="0"`) || !strings.Contains(page, `id="pin-eta"`) ||
		!strings.Contains(page, `state-pinning`) {
		t.Fatalf("the pinning page lacks its progress:\n%s", page)
	}
	if !strings.Contains(progress, `"state":"pinning"`) || !strings.Contains(progress, `"pin_total":2100`) {
		t.Fatalf("progress while pinning: %s", progress)
	}
	if _, page = get(t, e.c, e.srv.URL+"/replays/"+b.ID); strings.Contains(page, `id="pin-progress"`) {
		t.Fatal("a pinned draft still shows the pin's progress")
	}
}

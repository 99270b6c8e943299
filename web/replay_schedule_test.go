package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// The form with a start time schedules the replay: its page says when it
// starts, lists the pinned messages and offers Cancel (and Start now); a
// cancel before the start leaves the messages quarantined. A bad or past
// time marks the field and creates nothing.
func TestReplayFormSchedules(t *testing.T) {
	t.Parallel()
	e := newReplayEnv(t)
	_, v := e.newForm(e.c, "queue=orders&status=quarantined")
	for _, c := range []struct {
		value  string
		status int
		want   string
	}{
		{"tonight", http.StatusBadRequest, `id="start_at-error">A time like 2026-12-03T02:00:00Z`},
		{time.Now().Add(-time.Hour).UTC().Format(time.RFC3339), http.StatusUnprocessableEntity, `id="start_at-error">start_at `},
	} {
		w := url.Values{}
		for k, vs := range v {
			w[k] = vs
		}
		w.Set("start_at", c.value)
		res, page := postForm(t, e.c, e.srv.URL+"/replays", w)
		if res.StatusCode != c.status || !strings.Contains(page, c.want) || !strings.Contains(page, `aria-describedby="start_at-error"`) {
			t.Fatalf("start_at=%q: %d (want %d), page lacks %q:\n%s", c.value, res.StatusCode, c.status, c.want, page)
		}
	}
	at := time.Now().Add(3 * time.Hour).UTC().Truncate(time.Minute)
	v.Set("start_at", at.Format("2006-01-02T15:04")) // a datetime-local value, UTC
	b := e.dryRun(v)
	if b.State != quarantine.ReplayScheduled || b.StartAt == nil || !b.StartAt.Equal(at) || b.Total != 3 {
		t.Fatalf("scheduled: %+v", b)
	}
	res, page := get(t, e.c, e.srv.URL+"/replays/"+b.ID)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET replay: %d", res.StatusCode)
	}
	for _, want := range []string{"(scheduled)", `id="replay-start-at">starts at <time datetime="` + at.Format(time.RFC3339) + `">`,
		"in 2 h", `id="cancel"`, `id="start"`} {
		if !strings.Contains(page, want) {
			t.Fatalf("the scheduled replay's page lacks %q:\n%s", want, page)
		}
	}
	for _, m := range e.orders {
		if !strings.Contains(page, `<tr data-message="`+m.ID+`">`) {
			t.Fatalf("the page lacks the pinned %s", m.ID)
		}
	}
	res, _ = postForm(t, e.c, e.srv.URL+"/replays/"+b.ID+"/cancel", url.Values{"csrf": {csrf(t, page)}, "reason": {"not tonight"}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("cancel: %d", res.StatusCode)
	}
	if b = e.replay(b.ID); b.State != quarantine.ReplayCancelled {
		t.Fatalf("after cancel: %s", b.State)
	}
	for _, m := range e.orders {
		got, err := e.store.GetMessage(t.Context(), m.ID)
		if err != nil || got.Status != quarantine.StatusQuarantined {
			t.Fatalf("after cancel %s: %v %v", m.ID, got.Status, err)
		}
	}
}

package alert_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/alert"
	"github.com/quarantine-dev/quarantine/store"
)

// A dead letter older than max_age makes the alarm pending, then firing
// after `for` with exactly one notification, another after `repeat`, and
// draining the queue (discard or replay) resolves it with exactly one
// resolved notification.
func TestAlarmLifecycle(t *testing.T) {
	t.Parallel()
	drains := map[string]func(t *testing.T, s store.Store, id string){
		"discard": func(t *testing.T, s store.Store, id string) {
			res, err := s.Discard(t.Context(), quarantine.Discard{IDs: []string{id}, Reason: "obsolete", Actor: "alice"})
			if err != nil || len(res.Changed) != 1 {
				t.Fatalf("Discard = %+v, %v", res, err)
			}
		},
		"replay": func(t *testing.T, s store.Store, id string) {
			b, err := s.CreateReplay(t.Context(), quarantine.ReplayRequest{IDs: []string{id}, Rate: 10, Reason: "fixed", Actor: "alice"}, nil)
			if err != nil {
				t.Fatalf("CreateReplay: %v", err)
			}
			// The message leaves the waiting dead letters when its
			// outcome is recorded (a pin and a lease move no message).
			ls, err := s.LeaseReplayItems(t.Context(), b.ID, "engine", 1, time.Minute, 0)
			if err != nil || len(ls) != 1 {
				t.Fatalf("LeaseReplayItems = %d leases, %v", len(ls), err)
			}
			l := ls[0]
			if stale, err := s.RecordReplayResults(t.Context(), []quarantine.ReplayResult{{BatchID: b.ID, MessageID: l.Item.MessageID,
				Fence: l.Fence, Outcome: quarantine.ItemPublished, Destination: "memory:orders", PayloadVersion: l.Message.PayloadVersion,
				PayloadSHA256: l.Message.PayloadSHA256, At: time.Now()}}); err != nil || len(stale) != 0 {
				t.Fatalf("RecordReplayResults = %v, %v", stale, err)
			}
		},
	}
	for name, drain := range drains {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := newClock()
			s := openSQLite(t, c)
			hook := newReceiver(t)
			e := newEvaluator(t, s, c, []alert.Rule{ageRule()}, alert.Receiver{Name: "hook", Kind: alert.KindWebhook, URL: hook.srv.URL})

			young := deadLetter(t, s, c, "orders", 10*time.Minute)
			step(t, e)
			wantState(t, s, "orders-age", "orders", quarantine.AlarmInactive)
			c.Advance(6 * time.Minute) // 16 minutes old
			step(t, e)
			wantState(t, s, "orders-age", "orders", quarantine.AlarmPending)
			c.Advance(30 * time.Second)
			step(t, e)
			wantState(t, s, "orders-age", "orders", quarantine.AlarmPending)
			wantKinds(t, hook)
			c.Advance(30 * time.Second) // `for` has passed
			step(t, e)
			wantState(t, s, "orders-age", "orders", quarantine.AlarmFiring)
			wantKinds(t, hook, "firing")
			got := hook.webhooks(t)[0]
			if got.Alarm != "orders-age" || got.Queue != "orders" || got.Owner != "payments" || got.Status != quarantine.AlarmFiring ||
				got.AgeSeconds < 17*60 || got.Depth != 1 || !strings.Contains(got.Reason, "max_age 15m") || got.ID == 0 {
				t.Fatalf("firing notification = %+v", got)
			}
			for range 5 { // within `repeat`: nothing more
				c.Advance(10 * time.Minute)
				step(t, e)
			}
			wantKinds(t, hook, "firing")
			c.Advance(10 * time.Minute) // an hour after the first
			step(t, e)
			wantKinds(t, hook, "firing", "repeat")

			drain(t, s, young)
			step(t, e)
			wantState(t, s, "orders-age", "orders", quarantine.AlarmResolved)
			c.Advance(time.Hour)
			step(t, e)
			step(t, e)
			wantKinds(t, hook, "firing", "repeat", "resolved")
			res := hook.webhooks(t)[2]
			if res.Status != quarantine.AlarmResolved || res.EndsAt == nil || res.Reason != "" {
				t.Fatalf("resolved notification = %+v", res)
			}
		})
	}
}

// A pending alarm whose condition stops before `for` goes back to
// inactive and notifies nobody.
func TestAlarmPendingFlapIsSilent(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := openSQLite(t, c)
	hook := newReceiver(t)
	e := newEvaluator(t, s, c, []alert.Rule{ageRule()}, alert.Receiver{Name: "hook", Kind: alert.KindWebhook, URL: hook.srv.URL})
	id := deadLetter(t, s, c, "orders", 20*time.Minute)
	step(t, e)
	wantState(t, s, "orders-age", "orders", quarantine.AlarmPending)
	if _, err := s.Discard(t.Context(), quarantine.Discard{IDs: []string{id}, Reason: "x", Actor: "a"}); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Minute)
	step(t, e)
	wantState(t, s, "orders-age", "orders", quarantine.AlarmInactive)
	if hook.attempts.Load() != 0 {
		t.Fatalf("a pending alarm that stopped sent %d requests", hook.attempts.Load())
	}
}

// A restart while firing (a new evaluator on the same store) sends no
// duplicate; the new one resolves with exactly one notification.
func TestAlarmRestartWhileFiring(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := openSQLite(t, c)
	hook := newReceiver(t)
	rc := alert.Receiver{Name: "hook", Kind: alert.KindWebhook, URL: hook.srv.URL}
	r := ageRule()
	r.For = 0
	e1 := newEvaluator(t, s, c, []alert.Rule{r}, rc)
	id := deadLetter(t, s, c, "orders", 20*time.Minute)
	step(t, e1)
	wantKinds(t, hook, "firing")

	e2 := newEvaluator(t, s, c, []alert.Rule{r}, rc)
	for range 3 {
		c.Advance(15 * time.Second)
		step(t, e2)
	}
	wantState(t, s, "orders-age", "orders", quarantine.AlarmFiring)
	wantKinds(t, hook, "firing")
	if _, err := s.Discard(t.Context(), quarantine.Discard{IDs: []string{id}, Reason: "x", Actor: "a"}); err != nil {
		t.Fatal(err)
	}
	step(t, e2)
	e3 := newEvaluator(t, s, c, []alert.Rule{r}, rc)
	step(t, e3)
	wantKinds(t, hook, "firing", "resolved")
}

// A receiver that is down gets retries with a growing backoff, and once
// it is back it receives every notification, in order, exactly once,
// even across a restart.
func TestAlarmReceiverDown(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := openSQLite(t, c)
	hook := newReceiver(t)
	hook.down.Store(true)
	rc := alert.Receiver{Name: "hook", Kind: alert.KindWebhook, URL: hook.srv.URL}
	r := ageRule()
	r.For = 0
	e := newEvaluator(t, s, c, []alert.Rule{r}, rc)
	id := deadLetter(t, s, c, "orders", 20*time.Minute)

	start := c.Now()
	next := step(t, e)
	if hook.attempts.Load() != 1 || !next.Equal(start.Add(time.Second)) {
		t.Fatalf("after one failure: %d attempts, next retry %s, want 1 and %s", hook.attempts.Load(), next, start.Add(time.Second))
	}
	step(t, e) // not due yet
	if hook.attempts.Load() != 1 {
		t.Fatalf("retried before its backoff: %d attempts", hook.attempts.Load())
	}
	c.Advance(time.Second)
	next = step(t, e)
	if hook.attempts.Load() != 2 || !next.Equal(c.Now().Add(2*time.Second)) {
		t.Fatalf("second failure: %d attempts, next %s, want 2 and a doubled backoff", hook.attempts.Load(), next)
	}
	// Resolved while the receiver is still down: queued behind the firing one.
	if _, err := s.Discard(t.Context(), quarantine.Discard{IDs: []string{id}, Reason: "x", Actor: "a"}); err != nil {
		t.Fatal(err)
	}
	step(t, e)
	wantState(t, s, "orders-age", "orders", quarantine.AlarmResolved)
	pending, err := s.PendingAlarmNotifications(t.Context(), 10)
	if err != nil || len(pending) != 2 || pending[0].Kind != quarantine.AlarmKindFiring || pending[0].Attempts != 2 ||
		!strings.Contains(pending[0].LastError, "503") || pending[1].Kind != quarantine.AlarmKindResolved {
		t.Fatalf("outbox = %+v, %v; want firing (2 attempts, the 503 kept) then resolved", pending, err)
	}

	// Back up; a new evaluator (a restart) delivers both, in order.
	hook.down.Store(false)
	c.Advance(time.Minute)
	e2 := newEvaluator(t, s, c, []alert.Rule{r}, rc)
	step(t, e2)
	step(t, e2)
	wantKinds(t, hook, "firing", "resolved")
	if pending, _ := s.PendingAlarmNotifications(t.Context(), 10); len(pending) != 0 {
		t.Fatalf("outbox after delivery = %+v, want empty", pending)
	}
}

// A receiver answering 4xx (not 429) is not retried: the notification is
// recorded failed and later ones still go.
func TestAlarmReceiverRefuses(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := openSQLite(t, c)
	r := ageRule()
	r.For = 0
	e := newEvaluator(t, s, c, []alert.Rule{r}, alert.Receiver{Name: "hook", Kind: alert.KindWebhook, URL: notFound(t)})
	id := deadLetter(t, s, c, "orders", 20*time.Minute)
	next := step(t, e)
	pending, err := s.PendingAlarmNotifications(t.Context(), 10)
	if err != nil || len(pending) != 0 || !next.IsZero() {
		t.Fatalf("after a 404 the outbox holds %+v (next %s, %v), want nothing pending", pending, next, err)
	}
	if _, err := s.Discard(t.Context(), quarantine.Discard{IDs: []string{id}, Reason: "x", Actor: "a"}); err != nil {
		t.Fatal(err)
	}
	step(t, e)
	if pending, _ := s.PendingAlarmNotifications(t.Context(), 10); len(pending) != 0 {
		t.Fatalf("the resolved notification waits behind a refused one: %+v", pending)
	}
}

// Alertmanager gets the alert at /api/v2/alerts with labels and
// annotations, re-sent while firing with endsAt ahead, and ended on
// resolve with endsAt the resolve time; Slack gets a text.
func TestAlarmAlertmanagerAndSlack(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := openSQLite(t, c)
	am, slack := newReceiver(t), newReceiver(t)
	r := ageRule()
	r.For, r.Receivers = 0, []string{"am", "slack"}
	e := newEvaluator(t, s, c, []alert.Rule{r},
		alert.Receiver{Name: "am", Kind: alert.KindAlertmanager, URL: am.srv.URL + "/"},
		alert.Receiver{Name: "slack", Kind: alert.KindSlack, URL: slack.srv.URL + "/services/T/B/X"})
	id := deadLetter(t, s, c, "orders", 20*time.Minute)
	fired := c.Now()
	step(t, e)
	c.Advance(30 * time.Second)
	step(t, e) // no re-send yet
	c.Advance(30 * time.Second)
	step(t, e) // one minute: re-sent
	if _, err := s.Discard(t.Context(), quarantine.Discard{IDs: []string{id}, Reason: "x", Actor: "a"}); err != nil {
		t.Fatal(err)
	}
	c.Advance(15 * time.Second)
	resolved := c.Now()
	step(t, e)

	type amAlert struct {
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
		StartsAt    time.Time         `json:"startsAt"`
		EndsAt      time.Time         `json:"endsAt"`
	}
	am.mu.Lock()
	paths, bodies := am.paths, am.bodies
	am.mu.Unlock()
	if len(bodies) != 3 {
		t.Fatalf("Alertmanager got %d posts, want firing, one re-send, resolved", len(bodies))
	}
	var got [][]amAlert
	for i, b := range bodies {
		var a []amAlert
		if err := json.Unmarshal(b, &a); err != nil || len(a) != 1 || paths[i] != "/api/v2/alerts" {
			t.Fatalf("post %d to %s: %s (%v)", i, paths[i], b, err)
		}
		got = append(got, a)
	}
	l := got[0][0].Labels
	if l["alertname"] != "orders-age" || l["queue"] != "orders" || l["owner"] != "payments" || got[0][0].Annotations["summary"] == "" ||
		!got[0][0].StartsAt.Equal(fired) || !got[0][0].EndsAt.After(fired.Add(time.Minute)) {
		t.Fatalf("firing alert = %+v", got[0][0])
	}
	if !got[1][0].EndsAt.After(got[0][0].EndsAt) || got[1][0].Labels["alertname"] != "orders-age" {
		t.Fatalf("re-send = %+v, want endsAt later than %s", got[1][0], got[0][0].EndsAt)
	}
	if !got[2][0].EndsAt.Equal(resolved) {
		t.Fatalf("resolved alert endsAt = %s, want %s", got[2][0].EndsAt, resolved)
	}
	slack.mu.Lock()
	defer slack.mu.Unlock()
	if len(slack.bodies) != 2 || !strings.Contains(string(slack.bodies[0]), `"text":":rotating_light: FIRING`) ||
		!strings.Contains(string(slack.bodies[1]), "RESOLVED") {
		t.Fatalf("Slack got %q, want a firing then a resolved text", slack.bodies)
	}
}

// Rules select queues by glob and by owner; depth and inflow fire too.
func TestAlarmSelectAndThresholds(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := openSQLite(t, c)
	hook := newReceiver(t)
	rules := []alert.Rule{
		{Name: "owner", Owner: "payments", MaxAge: time.Hour, MaxDepth: 2, Receivers: []string{"hook"}},
		{Name: "glob", Queues: []string{"bill*"}, MaxAge: time.Hour, MaxInflow: 0.5, Receivers: []string{"hook"}},
	}
	e := newEvaluator(t, s, c, rules, alert.Receiver{Name: "hook", Kind: alert.KindWebhook, URL: hook.srv.URL})
	for range 3 {
		deadLetter(t, s, c, "orders", time.Minute) // owned by payments: depth 3 > 2
		deadLetter(t, s, c, "billing", time.Minute)
		deadLetter(t, s, c, "other", 2*time.Hour) // covered by neither
	}
	step(t, e)
	wantState(t, s, "owner", "orders", quarantine.AlarmFiring)
	wantState(t, s, "glob", "billing", quarantine.AlarmFiring) // 3 in 5 minutes: 0.6/min
	wantState(t, s, "owner", "other", quarantine.AlarmInactive)
	wantState(t, s, "glob", "orders", quarantine.AlarmInactive)
	if n := len(hook.webhooks(t)); n != 2 {
		t.Fatalf("got %d notifications, want 2", n)
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := openSQLite(t, c)
	good := alert.Receiver{Name: "hook", Kind: alert.KindWebhook, URL: "http://127.0.0.1:9/"}
	for name, tc := range map[string]struct {
		rules []alert.Rule
		rcv   []alert.Receiver
	}{
		"no max_age":       {[]alert.Rule{{Name: "a", Queues: []string{"q"}, Receivers: []string{"hook"}}}, []alert.Receiver{good}},
		"unknown receiver": {[]alert.Rule{{Name: "a", Queues: []string{"q"}, MaxAge: time.Minute, Receivers: []string{"x"}}}, []alert.Receiver{good}},
		"bad kind":         {nil, []alert.Receiver{{Name: "x", Kind: "pager", URL: "http://x"}}},
		"bad glob":         {[]alert.Rule{{Name: "a", Queues: []string{"["}, MaxAge: time.Minute, Receivers: []string{"hook"}}}, []alert.Receiver{good}},
		"duplicate":        {[]alert.Rule{ageRule(), ageRule()}, []alert.Receiver{good}},
	} {
		if _, err := alert.New(alert.Config{Store: s, Rules: tc.rules, Receivers: tc.rcv}); quarantine.ErrorCode(err) != quarantine.EINVALID {
			t.Errorf("%s: New = %v, want EINVALID", name, err)
		}
	}
}

// Purge deletes delivered notifications older than Keep, never pending
// ones.
func TestAlarmPurge(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := openSQLite(t, c)
	hook, down := newReceiver(t), newReceiver(t)
	down.down.Store(true)
	r := ageRule()
	r.For, r.Receivers = 0, []string{"hook", "down"}
	e := newEvaluator(t, s, c, []alert.Rule{r}, alert.Receiver{Name: "hook", Kind: alert.KindWebhook, URL: hook.srv.URL},
		alert.Receiver{Name: "down", Kind: alert.KindWebhook, URL: down.srv.URL})
	deadLetter(t, s, c, "orders", 20*time.Minute)
	step(t, e)
	wantKinds(t, hook, "firing")
	if n, err := e.Purge(t.Context()); err != nil || n != 0 {
		t.Fatalf("Purge of a fresh outbox = %d, %v; want 0", n, err)
	}
	c.Advance(alert.DefaultKeep + time.Minute)
	if n, err := e.Purge(t.Context()); err != nil || n != 1 {
		t.Fatalf("Purge after Keep = %d, %v; want the delivered one", n, err)
	}
	if pending, _ := s.PendingAlarmNotifications(t.Context(), 10); len(pending) != 1 || pending[0].Receiver != "down" {
		t.Fatalf("pending after the purge = %+v, want the undelivered one kept", pending)
	}
}

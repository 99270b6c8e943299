package alert_test

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/alert"
	"github.com/quarantine-dev/quarantine/internal/rules"
)

// wantMessagesLink fails t unless link opens the UI's list of the
// quarantined messages of orders older than 15 minutes at now, under the
// public URL.
func wantMessagesLink(t *testing.T, link string, now time.Time, aged bool) {
	t.Helper()
	u, err := url.Parse(link)
	if err != nil || u.Scheme+"://"+u.Host+u.Path != "https://quarantine.example.com/ui/messages" {
		t.Fatalf("link %q", link)
	}
	f, _, err := rules.FilterFromValues(u.Query(), now)
	if err != nil {
		t.Fatalf("the UI refuses the link's filter %q: %v", u.RawQuery, err)
	}
	wantBefore := time.Time{}
	if aged {
		wantBefore = now.Add(-15 * time.Minute)
	}
	if len(f.Queue) != 1 || f.Queue[0] != "orders" || len(f.Status) != 1 || f.Status[0] != quarantine.StatusQuarantined ||
		!f.FailedBefore.Equal(wantBefore) || len(u.Query()) != map[bool]int{true: 3, false: 2}[aged] {
		t.Fatalf("link %q selects %+v", link, f)
	}
}

// Every notification, on every kind of receiver, carries the link to the
// alarm's messages in the UI (queue, status, age) and to the runbook.
func TestAlarmNotificationsLinkToTheMessagesAndTheRunbook(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := openSQLite(t, c)
	hook, am, slack := newReceiver(t), newReceiver(t), newReceiver(t)
	r := ageRule()
	r.For, r.Receivers = 0, []string{"hook", "am", "slack"}
	e := newEvaluatorWith(t, alert.Config{Store: s, Rules: []alert.Rule{r}, Now: c.Now, PublicURL: "https://quarantine.example.com/ui/",
		Receivers: []alert.Receiver{{Name: "hook", Kind: alert.KindWebhook, URL: hook.srv.URL},
			{Name: "am", Kind: alert.KindAlertmanager, URL: am.srv.URL}, {Name: "slack", Kind: alert.KindSlack, URL: slack.srv.URL}}})
	id := deadLetter(t, s, c, "orders", 20*time.Minute)
	fired := c.Now()
	step(t, e)
	if _, err := s.Discard(t.Context(), quarantine.Discard{IDs: []string{id}, Reason: "x", Actor: "a"}); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Minute)
	step(t, e)

	ws := hook.webhooks(t)
	if len(ws) != 2 {
		t.Fatalf("webhook got %d notifications", len(ws))
	}
	wantMessagesLink(t, ws[0].URL, fired, true)
	wantMessagesLink(t, ws[1].URL, fired, false) // resolved: the queue's messages
	for _, w := range ws {
		if w.RunbookURL != alert.DefaultRunbookURL {
			t.Errorf("%s: runbook %q", w.Kind, w.RunbookURL)
		}
	}
	am.mu.Lock()
	var alerts []struct {
		Annotations  map[string]string `json:"annotations"`
		GeneratorURL string            `json:"generatorURL"`
	}
	err := json.Unmarshal(am.bodies[0], &alerts)
	am.mu.Unlock()
	if err != nil || len(alerts) != 1 {
		t.Fatalf("Alertmanager body: %v", err)
	}
	wantMessagesLink(t, alerts[0].Annotations["messages_url"], fired, true)
	if alerts[0].GeneratorURL != alerts[0].Annotations["messages_url"] || alerts[0].Annotations["runbook_url"] != alert.DefaultRunbookURL {
		t.Fatalf("Alertmanager annotations %v, generatorURL %q", alerts[0].Annotations, alerts[0].GeneratorURL)
	}
	slack.mu.Lock()
	var text struct{ Text string }
	err = json.Unmarshal(slack.bodies[0], &text)
	slack.mu.Unlock()
	if err != nil || !strings.Contains(text.Text, "<"+ws[0].URL+"|Open the messages>") || !strings.Contains(text.Text, "<"+alert.DefaultRunbookURL+"|Runbook>") {
		t.Fatalf("Slack text %q", text.Text)
	}
}

// A rule's runbook replaces the configured one; without a public URL no
// messages link is sent.
func TestAlarmRunbookPerRule(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := openSQLite(t, c)
	hook := newReceiver(t)
	r := ageRule()
	r.For, r.Runbook = 0, "https://wiki.example.com/orders#dead-letters"
	e := newEvaluatorWith(t, alert.Config{Store: s, Rules: []alert.Rule{r}, Now: c.Now, RunbookURL: "https://wiki.example.com/q",
		Receivers: []alert.Receiver{{Name: "hook", Kind: alert.KindWebhook, URL: hook.srv.URL}}})
	deadLetter(t, s, c, "orders", 20*time.Minute)
	step(t, e)
	ws := hook.webhooks(t)
	if len(ws) != 1 || ws[0].RunbookURL != r.Runbook || ws[0].URL != "" {
		t.Fatalf("webhooks %+v", ws)
	}
}

package alert_test

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/alert"
	"github.com/quarantine-dev/quarantine/internal/testclock"
	"github.com/quarantine-dev/quarantine/internal/testenv"
)

// alertmanagerURL returns the test Alertmanager's URL
// ($QUARANTINE_TEST_ALERTMANAGER_URL: the project's private one, as
// scripts/services.sh alertmanager starts and records it), skipping t when it does
// not answer, or failing it under CI=true.
func alertmanagerURL(t *testing.T) string {
	t.Helper()
	u := testenv.Require(t, testenv.AlertmanagerURL, "Alertmanager")
	resp, err := http.Get(u + "/-/ready")
	if err == nil {
		resp.Body.Close()
	}
	if err != nil || resp.StatusCode != http.StatusOK {
		testenv.Unavailable(t, testenv.AlertmanagerURL, fmt.Sprintf("no Alertmanager at %s: %v", u, err))
	}
	return u
}

// amAlert is an alert of Alertmanager's GET /api/v2/alerts.
type amAlert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	GeneratorURL string            `json:"generatorURL"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	Status       struct {
		State string `json:"state"`
	} `json:"status"`
}

// alertsNamed returns Alertmanager's current alerts named name.
func alertsNamed(t *testing.T, base, name string) []amAlert {
	t.Helper()
	resp, err := http.Get(base + "/api/v2/alerts?filter=" + url.QueryEscape(`alertname="`+name+`"`))
	if err != nil {
		t.Fatalf("GET alerts: %v", err)
	}
	defer resp.Body.Close()
	var out []amAlert
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("GET alerts: %v", err)
	}
	return out
}

// waitAlerts waits until Alertmanager lists n alerts named name.
func waitAlerts(t *testing.T, base, name string, n int) []amAlert {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		got := alertsNamed(t, base, name)
		if len(got) == n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("Alertmanager lists %d alerts named %s, want %d: %+v", len(got), name, n, got)
		}
	}
}

// A real Alertmanager receives the alert, shows it active in its own API
// with the links to the alarm's messages in the UI (public_url) and to
// its runbook, and no longer lists it once the queue is drained (endsAt
// passed).
func TestAlarmRealAlertmanager(t *testing.T) {
	t.Parallel()
	base := alertmanagerURL(t)
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := "quarantine-test-" + hex.EncodeToString(b)

	c := testclock.New(time.Now().UTC()) // Alertmanager compares endsAt with its own clock
	s := openSQLite(t, c)
	r := alert.Rule{Name: name, Queues: []string{"orders"}, MaxAge: 15 * time.Minute, Receivers: []string{"am"}}
	other := alert.Rule{Name: name + "-runbook", Queues: []string{"orders"}, MaxAge: 10 * time.Minute, Receivers: []string{"am"},
		Runbook: "https://runbooks.example/quarantine#orders"}
	e := newEvaluatorWith(t, alert.Config{Store: s, Rules: []alert.Rule{r, other}, Now: c.Now, PublicURL: "https://quarantine.example/ui/",
		Receivers: []alert.Receiver{{Name: "am", Kind: alert.KindAlertmanager, URL: base}}})
	id := deadLetter(t, s, c, "orders", 20*time.Minute)
	step(t, e)
	got := waitAlerts(t, base, name, 1)
	if a := got[0]; a.Status.State != "active" || a.Labels["queue"] != "orders" || a.Labels["owner"] != "payments" ||
		a.Labels["service"] != "quarantine" || !a.EndsAt.After(time.Now()) {
		t.Fatalf("Alertmanager shows %+v, want an active alert for orders ending in the future", a)
	}
	// The links as Alertmanager keeps them: the UI's view of exactly the
	// alarm's messages (the queue's waiting ones past max_age), also the
	// alert's generatorURL, and the runbook (the default, or the rule's).
	for _, tc := range []struct {
		name, messages, runbook string
	}{
		{name, "https://quarantine.example/ui/messages?older_than=15m0s&queue=orders&status=quarantined", alert.DefaultRunbookURL},
		{other.Name, "https://quarantine.example/ui/messages?older_than=10m0s&queue=orders&status=quarantined", other.Runbook},
	} {
		a := waitAlerts(t, base, tc.name, 1)[0]
		if a.Annotations["messages_url"] != tc.messages || a.GeneratorURL != tc.messages || a.Annotations["runbook_url"] != tc.runbook {
			t.Fatalf("Alertmanager keeps %s with messages_url %q, generatorURL %q, runbook_url %q; want %q, %q",
				tc.name, a.Annotations["messages_url"], a.GeneratorURL, a.Annotations["runbook_url"], tc.messages, tc.runbook)
		}
		if a.Annotations["summary"] == "" {
			t.Fatalf("%s has no summary: %+v", tc.name, a.Annotations)
		}
	}
	if pending, _ := s.PendingAlarmNotifications(t.Context(), 10); len(pending) != 0 {
		t.Fatalf("Alertmanager's 200 did not mark the notification delivered: %+v", pending)
	}

	if _, err := s.Discard(t.Context(), quarantine.Discard{IDs: []string{id}, Reason: "drained", Actor: "a"}); err != nil {
		t.Fatal(err)
	}
	// Resolved now: Alertmanager ignores an endsAt still in its future.
	c.Set(time.Now().UTC())
	step(t, e)
	wantState(t, s, name, "orders", quarantine.AlarmResolved)
	waitAlerts(t, base, name, 0) // resolved: endsAt passed, no longer listed
	waitAlerts(t, base, other.Name, 0)
}

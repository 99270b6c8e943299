package main

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/alert"
)

// The documented example of `alarms:` loads into rules and receivers.
func TestAlarmConfig_Values(t *testing.T) {
	t.Parallel()
	c, err := LoadConfig(writeConfig(t, `
alarms:
  - name: payments-age
    queues: ["payments.*", "billing"]
    owner: payments
    max_age: 15m
    max_depth: 1000
    max_inflow: 50
    for: 1m
    repeat: 1h
    interval: 5s
    receivers:
      - webhook: http://127.0.0.1:9099/hook
        name: ops-hook
        timeout: 2s
      - slack: https://hooks.slack.com/services/T000/B000/XXXX
      - alertmanager: http://127.0.0.1:9093
  - name: reports-age
    queues: [reports]
    max_age: 1d12h
    receivers: [{webhook: http://127.0.0.1:9099/hook, name: ops-hook, timeout: 2s}]
`), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	a := c.Alarms
	slack := alert.DefaultName(alert.KindSlack, "https://hooks.slack.com/services/T000/B000/XXXX")
	am := alert.DefaultName(alert.KindAlertmanager, "http://127.0.0.1:9093")
	want := []alert.Rule{
		{Name: "payments-age", Queues: []string{"payments.*", "billing"}, Owner: "payments", MaxAge: 15 * time.Minute,
			MaxDepth: 1000, MaxInflow: 50, For: time.Minute, Repeat: time.Hour, Receivers: []string{"ops-hook", slack, am}},
		{Name: "reports-age", Queues: []string{"reports"}, MaxAge: 36 * time.Hour, Receivers: []string{"ops-hook"}},
	}
	if !reflect.DeepEqual(a.Rules, want) {
		t.Fatalf("rules = %+v, want %+v", a.Rules, want)
	}
	if a.Interval != 5*time.Second || len(a.Receivers) != 3 || a.Receivers[0].Timeout != 2*time.Second ||
		a.Receivers[1].Kind != alert.KindSlack || a.Receivers[2].Timeout != 10*time.Second || strings.Contains(slack, "XXXX") {
		t.Fatalf("interval %s, receivers %+v (the slack name %q must not carry its URL)", a.Interval, a.Receivers, slack)
	}
	if _, err := alert.New(alert.Config{Rules: a.Rules, Receivers: a.Receivers}); err != nil {
		t.Fatalf("the evaluator refuses the decoded config: %v", err)
	}
}

func TestAlarmConfig_Errors(t *testing.T) {
	t.Parallel()
	hook := "    receivers: [{webhook: http://127.0.0.1:9/h}]\n"
	for _, tc := range []struct {
		name, yaml, field, want string
	}{
		{"no max_age", "alarms:\n  - queues: [a]\n" + hook, "alarms[0].max_age", "needs max_age"},
		{"bad max_age", "alarms:\n  - queues: [a]\n    max_age: soon\n" + hook, "alarms[0].max_age", "duration"},
		{"no queues", "alarms:\n  - max_age: 1m\n" + hook, "alarms[0].queues", "queues"},
		{"bad glob", "alarms:\n  - queues: [ok, \"[\"]\n    max_age: 1m\n" + hook, "alarms[0].queues[1]", "bad glob"},
		{"names", "alarms:\n  - queues: [a]\n    max_age: 1m\n" + hook + "  - queues: [b]\n    max_age: 1m\n" + hook, "alarms[0].name", "name"},
		{"duplicate", "alarms:\n  - {name: x, queues: [a], max_age: 1m, receivers: [{webhook: http://h/}]}\n  - {name: x, queues: [b], max_age: 1m, receivers: [{webhook: http://h/}]}\n", "alarms[1].name", "two alarms"},
		{"depth", "alarms:\n  - queues: [a]\n    max_age: 1m\n    max_depth: 0\n" + hook, "alarms[0].max_depth", "positive"},
		{"inflow", "alarms:\n  - queues: [a]\n    max_age: 1m\n    max_inflow: -1\n" + hook, "alarms[0].max_inflow", "positive"},
		{"for", "alarms:\n  - queues: [a]\n    max_age: 1m\n    for: -1m\n" + hook, "alarms[0].for", "duration"},
		{"no receivers", "alarms:\n  - queues: [a]\n    max_age: 1m\n", "alarms[0].receivers", "at least one receiver"},
		{"two kinds", "alarms:\n  - queues: [a]\n    max_age: 1m\n    receivers: [{webhook: http://h/, slack: http://s/}]\n", "alarms[0].receivers[0]", "exactly one"},
		{"bad url", "alarms:\n  - queues: [a]\n    max_age: 1m\n    receivers: [{alertmanager: 127.0.0.1:9093}]\n", "alarms[0].receivers[0].alertmanager", "http://"},
		{"timeout", "alarms:\n  - queues: [a]\n    max_age: 1m\n    receivers: [{webhook: http://h/, timeout: 1h}]\n", "alarms[0].receivers[0].timeout", "between"},
		{"name clash", "alarms:\n  - queues: [a]\n    max_age: 1m\n    receivers: [{webhook: http://h/, name: r}, {slack: http://s/, name: r}]\n", "alarms[0].receivers[1].name", "another receiver"},
		{"unknown key", "alarms:\n  - queues: [a]\n    max_age: 1m\n    page: true\n" + hook, "alarms[0].page", "unknown key"},
	} {
		_, err := LoadConfig(writeConfig(t, tc.yaml), envOf(nil))
		msg := describe(err)
		if quarantine.ErrorCode(err) != quarantine.EINVALID || quarantine.ErrorField(err) != tc.field ||
			!strings.Contains(msg, tc.want) || !strings.Contains(msg, tc.field) {
			t.Errorf("%s: err = %v (field %q), want EINVALID on %s saying %q", tc.name, err, quarantine.ErrorField(err), tc.field, tc.want)
		}
	}
}

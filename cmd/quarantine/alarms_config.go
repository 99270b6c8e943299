package main

import (
	"fmt"
	"math"
	"path"
	"strings"
	"time"

	"github.com/quarantine-dev/quarantine/alert"
)

// AlarmsConfig is the `alarms:` key: the age alarms and the receivers
// they notify.
type AlarmsConfig struct {
	Rules     []alert.Rule
	Receivers []alert.Receiver
	// Interval is how often the alarms are evaluated: the shortest
	// interval an alarm asks for (default 15 s).
	Interval time.Duration
}

// fileAlarm is one entry of `alarms:`.
type fileAlarm struct {
	Name      string         `yaml:"name"`
	Queues    []string       `yaml:"queues"`
	Owner     string         `yaml:"owner"`
	MaxAge    any            `yaml:"max_age"`
	MaxDepth  *int64         `yaml:"max_depth"`
	MaxInflow *float64       `yaml:"max_inflow"`
	For       any            `yaml:"for"`
	Repeat    any            `yaml:"repeat"`
	Interval  any            `yaml:"interval"`
	Receivers []fileReceiver `yaml:"receivers"`
	Runbook   string         `yaml:"runbook"`
}

// fileReceiver is one receiver of an alarm: exactly one of webhook, slack
// or alertmanager (a URL), with an optional name and timeout.
type fileReceiver struct {
	Webhook      string `yaml:"webhook"`
	Slack        string `yaml:"slack"`
	Alertmanager string `yaml:"alertmanager"`
	Name         string `yaml:"name"`
	Timeout      any    `yaml:"timeout"`
}

// decodeAlarms reads `alarms:` into a. Errors name alarms[i].key.
func (s *configSource) decodeAlarms(fa []fileAlarm, a *AlarmsConfig) error {
	if len(fa) == 0 {
		return nil
	}
	receivers := map[string]alert.Receiver{}
	var order []string
	names := map[string]bool{}
	a.Rules, a.Interval = nil, 0
	for i, f := range fa {
		key := fmt.Sprintf("alarms[%d]", i)
		r := alert.Rule{Name: strings.TrimSpace(f.Name), Queues: f.Queues, Owner: f.Owner, Runbook: f.Runbook}
		if r.Name == "" {
			if len(fa) > 1 {
				return s.errorf(key+".name", "give each alarm a name when there are several")
			}
			r.Name = "dead-letter-age"
		}
		if names[r.Name] {
			return s.errorf(key+".name", "two alarms are named %q", r.Name)
		}
		names[r.Name] = true
		if len(r.Queues) == 0 && r.Owner == "" {
			return s.errorf(key+".queues", "an alarm needs queues (glob patterns) or an owner")
		}
		for j, q := range r.Queues {
			if _, err := path.Match(q, ""); err != nil || q == "" {
				return s.errorf(fmt.Sprintf("%s.queues[%d]", key, j), "bad glob pattern %q", q)
			}
		}
		var interval time.Duration
		durs := []struct {
			name     string
			v        any
			dst      *time.Duration
			min, max time.Duration
			required bool
		}{
			{"max_age", f.MaxAge, &r.MaxAge, time.Second, 365 * 24 * time.Hour, true},
			{"for", f.For, &r.For, 0, 24 * time.Hour, false},
			{"repeat", f.Repeat, &r.Repeat, 0, 30 * 24 * time.Hour, false},
			{"interval", f.Interval, &interval, 10 * time.Millisecond, time.Hour, false},
		}
		for _, d := range durs {
			if d.v == nil {
				if d.required {
					return s.errorf(key+"."+d.name, "an alarm needs %s, a duration like 15m", d.name)
				}
				continue
			}
			v, err := configDuration(d.v)
			if err != nil || v < d.min || v > d.max {
				return s.errorf(key+"."+d.name, "must be a duration between %s and %s, like 15m", d.min, d.max)
			}
			*d.dst = v
		}
		if interval > 0 && (a.Interval == 0 || interval < a.Interval) {
			a.Interval = interval
		}
		if f.MaxDepth != nil {
			if *f.MaxDepth < 1 {
				return s.errorf(key+".max_depth", "must be a positive number of messages")
			}
			r.MaxDepth = *f.MaxDepth
		}
		if f.MaxInflow != nil {
			if math.IsNaN(*f.MaxInflow) || math.IsInf(*f.MaxInflow, 0) || *f.MaxInflow <= 0 {
				return s.errorf(key+".max_inflow", "must be a positive number of messages a minute")
			}
			r.MaxInflow = *f.MaxInflow
		}
		if len(f.Receivers) == 0 {
			return s.errorf(key+".receivers", "an alarm needs at least one receiver")
		}
		for j, fr := range f.Receivers {
			rk := fmt.Sprintf("%s.receivers[%d]", key, j)
			rc, err := s.decodeReceiver(rk, fr)
			if err != nil {
				return err
			}
			if old, ok := receivers[rc.Name]; ok {
				if old.Kind != rc.Kind || old.URL != rc.URL || old.Timeout != rc.Timeout {
					return s.errorf(rk+".name", "another receiver is named %q", rc.Name)
				}
			} else {
				receivers[rc.Name] = rc
				order = append(order, rc.Name)
			}
			r.Receivers = append(r.Receivers, rc.Name)
		}
		a.Rules = append(a.Rules, r)
	}
	a.Receivers = nil
	for _, n := range order {
		a.Receivers = append(a.Receivers, receivers[n])
	}
	if a.Interval == 0 {
		a.Interval = alert.DefaultInterval
	}
	return nil
}

// decodeReceiver reads one receiver at key.
func (s *configSource) decodeReceiver(key string, fr fileReceiver) (alert.Receiver, error) {
	var rc alert.Receiver
	n := 0
	for _, k := range []struct{ kind, url string }{
		{alert.KindWebhook, fr.Webhook}, {alert.KindSlack, fr.Slack}, {alert.KindAlertmanager, fr.Alertmanager},
	} {
		if k.url != "" {
			n++
			rc.Kind, rc.URL = k.kind, k.url
		}
	}
	if n != 1 {
		return rc, s.errorf(key, "give exactly one of webhook, slack or alertmanager, with its URL")
	}
	if !strings.HasPrefix(rc.URL, "http://") && !strings.HasPrefix(rc.URL, "https://") {
		return rc, s.errorf(key+"."+rc.Kind, "must be an http:// or https:// URL")
	}
	rc.Name = strings.TrimSpace(fr.Name)
	if rc.Name == "" {
		rc.Name = alert.DefaultName(rc.Kind, rc.URL)
	}
	rc.Timeout = 10 * time.Second
	if fr.Timeout != nil {
		t, err := configDuration(fr.Timeout)
		if err != nil || t < 100*time.Millisecond || t > 5*time.Minute {
			return rc, s.errorf(key+".timeout", "must be a duration between 100ms and 5m")
		}
		rc.Timeout = t
	}
	return rc, nil
}

// Defaults of `alarms:`: none, evaluated every 15 s once some are set.
func defaultAlarmsConfig() AlarmsConfig {
	return AlarmsConfig{Interval: alert.DefaultInterval}
}

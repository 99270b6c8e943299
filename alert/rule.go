package alert

import (
	"fmt"
	"path"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// Rule is one alarm of the `alarms:` configuration.
type Rule struct {
	// Name identifies the alarm (its state rows, the alertname label).
	Name string
	// Queues are glob patterns (path.Match) on the queue name. With
	// Owner set too, a queue must match both; with Queues empty, every
	// queue of Owner.
	Queues []string
	Owner  string
	// MaxAge: the oldest quarantined message older than this fires.
	MaxAge time.Duration
	// MaxDepth (quarantined messages) and MaxInflow (new dead letters a
	// minute, over the last 5 minutes) fire too when above; 0 is off.
	MaxDepth  int64
	MaxInflow float64
	// For is how long the condition must hold before the alarm fires.
	For time.Duration
	// Repeat re-notifies the webhook and Slack receivers while firing
	// (0: never).
	Repeat time.Duration
	// Receivers names the receivers notified.
	Receivers []string
	// Runbook is the URL of this alarm's runbook section ("": the
	// evaluator's RunbookURL).
	Runbook string
}

// Validate checks r (EINVALID naming the field).
func (r *Rule) Validate() error {
	switch {
	case r.Name == "":
		return quarantine.FieldErrorf(quarantine.EINVALID, "name", "an alarm needs a name")
	case len(r.Queues) == 0 && r.Owner == "":
		return quarantine.FieldErrorf(quarantine.EINVALID, "queues", "an alarm needs queues or an owner")
	case r.MaxAge <= 0:
		return quarantine.FieldErrorf(quarantine.EINVALID, "max_age", "an alarm needs a positive max_age")
	case r.MaxDepth < 0 || r.MaxInflow < 0 || r.For < 0 || r.Repeat < 0:
		return quarantine.FieldErrorf(quarantine.EINVALID, "for", "thresholds and durations cannot be negative")
	case len(r.Receivers) == 0:
		return quarantine.FieldErrorf(quarantine.EINVALID, "receivers", "an alarm needs at least one receiver")
	}
	for _, q := range r.Queues {
		if _, err := path.Match(q, ""); err != nil || q == "" {
			return quarantine.FieldErrorf(quarantine.EINVALID, "queues", "bad glob pattern %q", q)
		}
	}
	return nil
}

// Matches reports whether the rule covers queue, owned by owner.
func (r *Rule) Matches(queue, owner string) bool {
	if r.Owner != "" && r.Owner != owner {
		return false
	}
	if len(r.Queues) == 0 {
		return true
	}
	for _, q := range r.Queues {
		if ok, _ := path.Match(q, queue); ok {
			return true
		}
	}
	return false
}

// values are what one evaluation measured on one queue.
type values struct {
	age    time.Duration // of the oldest quarantined message; 0 when none
	depth  int64         // quarantined messages
	inflow float64       // new dead letters a minute, over 5 minutes
}

// valuesOf measures st at now.
func valuesOf(st quarantine.QueueStats, now time.Time) values {
	v := values{depth: st.Counts[quarantine.StatusQuarantined], inflow: float64(st.Inflow5m) / 5}
	if st.OldestQuarantinedAt != nil && now.After(*st.OldestQuarantinedAt) {
		v.age = now.Sub(*st.OldestQuarantinedAt)
	}
	return v
}

// breach says which threshold v crosses ("" when none).
func (r *Rule) breach(v values) string {
	switch {
	case v.age > r.MaxAge:
		return fmt.Sprintf("the oldest dead letter is %s old (max_age %s)", v.age.Truncate(time.Second), r.MaxAge)
	case r.MaxDepth > 0 && v.depth > r.MaxDepth:
		return fmt.Sprintf("%d dead letters wait (max_depth %d)", v.depth, r.MaxDepth)
	case r.MaxInflow > 0 && v.inflow > r.MaxInflow:
		return fmt.Sprintf("%.1f new dead letters a minute (max_inflow %g)", v.inflow, r.MaxInflow)
	}
	return ""
}

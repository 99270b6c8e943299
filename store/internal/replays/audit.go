package replays

import (
	"time"

	"github.com/quarantine-dev/quarantine"
)

// CreateEvents returns the events of a new batch, in order: replay.create
// and replay.force when an override was given (Create appends replay.start
// when it starts the batch).
func CreateEvents(r *quarantine.ReplayRequest, b *quarantine.ReplayBatch) []*quarantine.AuditEvent {
	type create struct {
		Reason              string                       `json:"reason"`
		DryRun              bool                         `json:"dry_run"`
		Total               int                          `json:"total"`
		Skipped             int                          `json:"skipped"`
		Destination         quarantine.ReplayDestination `json:"destination"`
		Rate                float64                      `json:"rate"`
		ForceWithoutKey     bool                         `json:"force_without_key,omitempty"`
		Force               bool                         `json:"force,omitempty"`
		AcceptKeyRuleChange bool                         `json:"accept_key_rule_change,omitempty"`
		StartAt             *time.Time                   `json:"start_at,omitempty"`
	}
	ev := quarantine.NewAuditEvent(r.Actor, quarantine.ActionReplayCreate, b.ID, create{
		Reason: r.Reason, DryRun: r.DryRun, Total: b.Total, Skipped: b.Counts[quarantine.ItemSkipped],
		Destination: r.Destination, Rate: r.Rate, ForceWithoutKey: r.ForceWithoutKey, Force: r.Force,
		AcceptKeyRuleChange: r.AcceptKeyRuleChange, StartAt: b.StartAt,
	})
	out := []*quarantine.AuditEvent{&ev}
	if f := ForceEvent(r.Actor, b.ID, r.Reason, r.ForceWithoutKey, r.Force, r.AcceptKeyRuleChange); f != nil {
		out = append(out, f)
	}
	return out
}

// ForceEvent returns the replay.force event of the overrides given, or
// nil when none was.
func ForceEvent(actor, batchID, reason string, withoutKey, force, keyRule bool) *quarantine.AuditEvent {
	var flags []string
	for _, f := range []struct {
		on   bool
		name string
	}{{withoutKey, "force_without_key"}, {force, "force"}, {keyRule, "accept_key_rule_change"}} {
		if f.on {
			flags = append(flags, f.name)
		}
	}
	if len(flags) == 0 {
		return nil
	}
	ev := quarantine.NewAuditEvent(actor, quarantine.ActionReplayForce, batchID, struct {
		Reason string   `json:"reason"`
		Flags  []string `json:"flags"`
	}{reason, flags})
	return &ev
}

// ChangeEvent returns the event of a state change (details: reason, from,
// to).
func ChangeEvent(actor, action, batchID, reason string, from, to quarantine.ReplayState) *quarantine.AuditEvent {
	ev := quarantine.NewAuditEvent(actor, action, batchID, struct {
		Reason string                 `json:"reason"`
		From   quarantine.ReplayState `json:"from"`
		To     quarantine.ReplayState `json:"to"`
	}{reason, from, to})
	return &ev
}

// CompleteEvent returns the replay.complete event of b, by system.
func CompleteEvent(b *quarantine.ReplayBatch) *quarantine.AuditEvent {
	reason := "every item has an outcome"
	if _, why := b.DoneState(); why != "" {
		reason += ": " + why
	}
	return ChangeEvent(SystemActor, quarantine.ActionReplayDone, b.ID, reason, quarantine.ReplayRunning, b.State)
}

// Finish moves b, whose every item has an outcome (b.Counts current), to
// the state it ends in (quarantine.ReplayBatch.DoneState) and returns the
// audit event recording it.
func Finish(b *quarantine.ReplayBatch, now time.Time) *quarantine.AuditEvent {
	to, why := b.DoneState()
	Move(b, to, why, now)
	return CompleteEvent(b)
}

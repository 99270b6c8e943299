package replays

import (
	"slices"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// SystemActor records what the store or the engine did by itself.
const SystemActor = "system"

// Counts returns the counts of items by outcome, every outcome present.
func Counts(items []quarantine.ReplayItem) map[quarantine.ItemOutcome]int {
	c := ZeroCounts()
	for _, it := range items {
		c[it.Outcome]++
	}
	return c
}

// ZeroCounts returns a map with every outcome at zero.
func ZeroCounts() map[quarantine.ItemOutcome]int {
	c := make(map[quarantine.ItemOutcome]int, len(quarantine.ItemOutcomes))
	for _, o := range quarantine.ItemOutcomes {
		c[o] = 0
	}
	return c
}

// NewBatch returns the batch r creates at now from its planned items and
// the candidates they came from: a draft, the pinned set, expiring after
// r.DraftTTL for a dry run (without one, Create starts it at once).
// Items get the batch's id and now as their update time.
func NewBatch(r *quarantine.ReplayRequest, items []quarantine.ReplayItem, sel []quarantine.ReplayCandidate, now time.Time) *quarantine.ReplayBatch {
	now = now.UTC().Truncate(time.Microsecond)
	b := &quarantine.ReplayBatch{
		ID:              quarantine.NewID(now),
		Reason:          r.Reason,
		Actor:           r.Actor,
		Destination:     r.Destination,
		Rate:            r.Rate,
		Burst:           r.Burst,
		Canary:          r.Canary,
		Observe:         r.Observe.Truncate(time.Microsecond),
		HaltRefailRatio: r.HaltRefailRatio,
		ForceWithoutKey: r.ForceWithoutKey,
		Queues:          []string{},
		Owners:          []string{},
		Total:           len(items),
		PinTotal:        len(items),
		Counts:          Counts(items),
		CreatedAt:       now,
		UpdatedAt:       now,
	}
	shape(b, r)
	for _, c := range sel {
		if !c.Found {
			continue
		}
		if !slices.Contains(b.Queues, c.Queue) {
			b.Queues = append(b.Queues, c.Queue)
		}
		if !slices.Contains(b.Owners, c.Owner) {
			b.Owners = append(b.Owners, c.Owner)
		}
	}
	slices.Sort(b.Queues)
	slices.Sort(b.Owners)
	for i := range items {
		items[i].BatchID, items[i].UpdatedAt = b.ID, now
		if items[i].DroppedHeaders == nil {
			items[i].DroppedHeaders = []string{}
		}
	}
	b.State = quarantine.ReplayDraft
	if r.DryRun {
		exp := now.Add(r.DraftTTL)
		b.ExpiresAt = &exp
	}
	return b
}

// shape sets what b's counts decide: a canary holds the rest of a batch
// back, so a batch no larger than its canary has nothing to hold back.
func shape(b *quarantine.ReplayBatch, r *quarantine.ReplayRequest) {
	b.CanaryVerdict = quarantine.CanaryNone
	if r.Canary > 0 && b.Counts[quarantine.ItemPending] > r.Canary {
		b.CanaryVerdict = quarantine.CanaryPending
	}
}

// Pending returns the message ids of the pending items.
func Pending(items []quarantine.ReplayItem) []string {
	var out []string
	for _, it := range items {
		if it.Outcome == quarantine.ItemPending {
			out = append(out, it.MessageID)
		}
	}
	return out
}

// Move sets b's state to `to` at now with reason, stamping finished_at for
// a terminal state and clearing the expiry of a draft that leaves it.
func Move(b *quarantine.ReplayBatch, to quarantine.ReplayState, reason string, now time.Time) {
	if (b.State == quarantine.ReplayDraft || b.State == quarantine.ReplayScheduled) && to == quarantine.ReplayRunning {
		b.StartedAt = &now
	}
	if to != quarantine.ReplayDraft {
		b.ExpiresAt = nil
	}
	b.State, b.StateReason, b.UpdatedAt = to, reason, now
	if to.Terminal() {
		b.FinishedAt = &now
	}
}

// Schedule makes the new batch b (a draft) a scheduled one, started at
// at; force: its start overrides the incident guard.
func Schedule(b *quarantine.ReplayBatch, at time.Time, force bool) {
	at = at.UTC().Truncate(time.Microsecond)
	b.State, b.StartAt, b.StartForce, b.ExpiresAt = quarantine.ReplayScheduled, &at, force, nil
}

// Expired reports whether b is a draft past its expiry at now.
func Expired(b *quarantine.ReplayBatch, now time.Time) bool {
	return b.State == quarantine.ReplayDraft && b.ExpiresAt != nil && now.After(*b.ExpiresAt)
}

// ValidateResult checks one result given to RecordReplayResults.
func ValidateResult(r quarantine.ReplayResult) error {
	switch r.Outcome {
	case quarantine.ItemPublished, quarantine.ItemDeduplicated, quarantine.ItemFailed, quarantine.ItemSkipped:
	default:
		return quarantine.FieldErrorf(quarantine.EINVALID, "outcome", "a result cannot be %q", r.Outcome)
	}
	if !quarantine.ValidID(r.BatchID) || !quarantine.ValidID(r.MessageID) {
		return quarantine.Errorf(quarantine.EINVALID, "a result names no valid batch and message")
	}
	return nil
}

// Published reports whether o means the broker has the message.
func Published(o quarantine.ItemOutcome) bool {
	return o == quarantine.ItemPublished || o == quarantine.ItemDeduplicated
}

// ValidVerdict reports whether v is a canary verdict.
func ValidVerdict(v string) bool {
	switch v {
	case quarantine.CanaryNone, quarantine.CanaryPending, quarantine.CanaryObserving, quarantine.CanaryPassed, quarantine.CanaryFailed:
		return true
	}
	return false
}

package rules

import (
	"github.com/quarantine-dev/quarantine"
)

// The authorization of replay destinations. Queues belong to teams by the
// owner rules of the configuration (owners:, first match wins); brokers
// belong to no one. So what a token may publish to is decided by the
// queue a replay publishes to:
//
//   - without destination.queue, each message goes back to its own queue
//     (through its own broker, the destinations: entry matching that
//     queue, or destination.collector): a token may do that for every
//     message it may act on, which the selection already ensures;
//   - with destination.queue, that queue's owner must be one of the
//     token's owners. A token without owners acts for every team: as an
//     operator it may name any queue a team owns, but not one that no
//     rule gives to a team; only an admin without owners may (and an
//     admin with owners is limited to them like anyone else).
//
// The destinations: entry that matches destination.queue, and a
// destination.collector, only choose how the named queue is reached, so
// the queue's check covers them.

// mayPublishTo reports whether t may send replays to queue, a queue named
// by a request rather than a message's own.
func mayPublishTo(t *quarantine.Token, rules []quarantine.OwnerRule, queue string) bool {
	if len(t.Owners) == 0 && t.Role == quarantine.RoleAdmin {
		return true
	}
	owner := quarantine.AssignOwner(rules, queue)
	return owner != "" && t.Sees(owner)
}

// DestinationAllowed checks that t may replay to dst (see the rules above,
// with d.Owners as the owner rules): nil, or EFORBIDDEN naming
// /destination. ReplayDefaults.Request checks it when a batch is created;
// a start or resume checks it again for the token that publishes. The
// caller records a refusal as access.denied (DestinationDenied gives its
// details).
func (d ReplayDefaults) DestinationAllowed(t *quarantine.Token, dst quarantine.ReplayDestination) error {
	if dst.Queue == "" || mayPublishTo(t, d.Owners, dst.Queue) {
		return nil
	}
	owner := quarantine.AssignOwner(d.Owners, dst.Queue)
	if owner == "" {
		return quarantine.FieldErrorf(quarantine.EFORBIDDEN, "/destination",
			"queue %q belongs to no team (no owners: rule matches it): only an admin without owners may replay to it", quarantine.Clip(dst.Queue))
	}
	return quarantine.FieldErrorf(quarantine.EFORBIDDEN, "/destination",
		"queue %q belongs to team %q, which this token may not act for", quarantine.Clip(dst.Queue), quarantine.Clip(owner))
}

// DestinationDenied returns the details of the access.denied event of a
// destination refused to a token: the destination and its queue's owner
// ("" for none).
func (d ReplayDefaults) DestinationDenied(dst quarantine.ReplayDestination) map[string]any {
	return map[string]any{
		"reason":      "the destination queue is outside the token's owners",
		"destination": map[string]any{"queue": quarantine.Clip(dst.Queue), "collector": quarantine.Clip(dst.Collector)},
		"owner":       quarantine.AssignOwner(d.Owners, dst.Queue),
	}
}

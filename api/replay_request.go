package api

import (
	"slices"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// ReplayInput is a replay request as a client gave it, its values parsed
// (the JSON body of POST /api/v1/replays, or the web UI's form). Nil
// members take the configured defaults (ReplayDefaults).
type ReplayInput struct {
	IDs                 []string           // checked by CleanIDs
	Filter              *quarantine.Filter // exactly one of IDs and Filter
	ExpectCount         *int
	Destination         quarantine.ReplayDestination
	Rate                *float64
	Burst               *int
	Canary              *int
	Observe             *time.Duration
	HaltRefailRatio     *float64
	Reason              string
	DryRun              bool
	ForceWithoutKey     bool
	Force               bool
	AcceptKeyRuleChange bool
	StartAt             *time.Time // schedules the batch (nil: started at once, or a draft)
}

// WithDefaults returns d with its zero rate, maximum rate and draft TTL
// replaced by quarantine's defaults.
func (d ReplayDefaults) WithDefaults() ReplayDefaults {
	if d.Rate <= 0 {
		d.Rate = quarantine.DefaultReplayRate
	}
	if d.MaxRate <= 0 {
		d.MaxRate = quarantine.DefaultReplayMaxRat
	}
	if d.DraftTTL <= 0 {
		d.DraftTTL = quarantine.DefaultDraftTTL
	}
	return d
}

// Guard returns the incident guard of d, nil when it has none: a start
// (quarantine.ReplayChange.Guard) checks it.
func (d ReplayDefaults) Guard() *quarantine.IncidentGuard { return d.guard() }

// Request checks in and builds the store's request, with d's defaults
// (d as WithDefaults returns it) and t's owners and actor. Errors name the
// field as a JSON Pointer ("/rate", "/destination/collector"):
// EUNPROCESSABLE for the reason, a rate above d.MaxRate and an unknown
// collector, EINVALID for malformed values, then EFORBIDDEN naming
// /destination for a destination queue t may not replay to
// (DestinationAllowed: the caller records it as access.denied). Both the
// API and the web UI create replays with it.
func (d ReplayDefaults) Request(in ReplayInput, t *quarantine.Token) (quarantine.ReplayRequest, error) {
	req := quarantine.ReplayRequest{
		IDs: in.IDs, Filter: in.Filter, // the store narrows a filter to req.Owners
		ExpectCount: in.ExpectCount, Destination: in.Destination, Rate: d.Rate, Burst: d.Burst, Canary: d.Canary,
		Observe: d.Observe, HaltRefailRatio: d.HaltRefailRatio, DryRun: in.DryRun, ForceWithoutKey: in.ForceWithoutKey,
		Force: in.Force, AcceptKeyRuleChange: in.AcceptKeyRuleChange, Reason: in.Reason,
		Actor: t.Actor(), Owners: tokenOwners(t), DraftTTL: d.DraftTTL,
		MaxReplays: d.MaxReplays, Admin: t.Role == quarantine.RoleAdmin, Guard: d.guard(), StartAt: in.StartAt,
		ConfirmAbove: d.ConfirmAbove,
	}
	if in.Rate != nil {
		req.Rate = *in.Rate
		if in.Burst == nil {
			req.Burst = 0 // the default burst follows the rate asked for
		}
	}
	if in.Burst != nil {
		req.Burst = *in.Burst
	}
	if in.Canary != nil {
		req.Canary = *in.Canary
	}
	if in.HaltRefailRatio != nil {
		req.HaltRefailRatio = *in.HaltRefailRatio
	}
	if in.Observe != nil {
		req.Observe = *in.Observe
	}
	if err := req.Validate(d.MaxRate); err != nil {
		return req, replayField(err, "")
	}
	if c := req.Destination.Collector; c != "" && !slices.Contains(d.Collectors, c) {
		return req, quarantine.FieldErrorf(quarantine.EUNPROCESSABLE, "/destination/collector",
			"no collector named %q is configured", clip(c))
	}
	if err := d.DestinationAllowed(t, req.Destination); err != nil {
		return req, err
	}
	return req, nil
}

// EstimateSeconds is how long the pending items of b take at its rate,
// plus the canary's observation when it has one still to come.
func EstimateSeconds(b *quarantine.ReplayBatch) float64 { return estimateSeconds(b) }

// ReplayProgress returns what the API computes from b at now: the achieved
// rate ((published + deduplicated) per second since it started, until it
// finished; nil before it starts) and the ETA in seconds (nil once it is
// terminal).
func ReplayProgress(b *quarantine.ReplayBatch, now time.Time) (achievedRate, etaSeconds *float64) {
	v := newReplayJSON(b, now)
	return v.AchievedRate, v.ETASeconds
}

// SeesReplay reports whether t may see b: a token without owners sees
// every batch; one with owners the batches touching one of them, and
// those it created.
func SeesReplay(t *quarantine.Token, b *quarantine.ReplayBatch) bool { return seesReplay(t, b) }

// ActsOnReplay reports whether t's owners allow it to start, pause,
// resume or cancel b: every owner of b's messages must be one of t's (its
// role is checked apart: an operator at least).
func ActsOnReplay(t *quarantine.Token, b *quarantine.ReplayBatch) bool { return actsOnReplay(t, b) }

package rules

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

// ReplayDefaults are the configured defaults of a replay request (each
// used when the request leaves the field out) and its limits.
type ReplayDefaults struct {
	Rate            float64       // msg/s (0: quarantine.DefaultReplayRate)
	MaxRate         float64       // a request above it is 422 (0: quarantine.DefaultReplayMaxRat)
	Burst           int           // tokens at once (0: rate/10, at least 1)
	Canary          int           // items published first, then observed
	Observe         time.Duration // how long the canary is observed
	HaltRefailRatio float64       // the breaker's threshold (0: off)
	DraftTTL        time.Duration // how long a dry run's draft may wait (0: quarantine.DefaultDraftTTL)
	// KeyRule describes each queue's idempotency rule now, so that a
	// message collected under another rule is skipped (nil: no check).
	KeyRule quarantine.KeyRuleFunc
	// Collectors are the configured collector names: a destination
	// naming another one is 422.
	Collectors []string
	// Owners are the owner rules (config owners:) that decide which
	// destination queues a token may name (DestinationAllowed). api.New and
	// web.New use their Config.Owners when it is nil; with none, only an admin without
	// owners may name a destination queue.
	Owners []quarantine.OwnerRule
	// MaxReplays: a job replayed that many times already (and failed
	// again each time) is skipped unless an admin replays it (0: no cap).
	MaxReplays int
	// IncidentWindow and IncidentRate are the incident guard: a batch
	// larger than its canary does not start while one of its queues
	// received more than IncidentRate new dead letters a minute over the
	// last IncidentWindow, unless force (IncidentWindow 0: no guard).
	IncidentWindow time.Duration
	IncidentRate   float64
	// ConfirmAbove: a replay started at once that selects more messages
	// needs expect_count (config bulk.confirm_above; 0: never).
	ConfirmAbove int
	// Route checks where a message of a batch would be published (the
	// replay engine's routes), so that a dry run names the undeliverable
	// messages before Start (nil: only the skipped ones).
	Route quarantine.RouteCheck
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
func (d ReplayDefaults) Guard() *quarantine.IncidentGuard {
	if d.IncidentWindow <= 0 {
		return nil
	}
	return &quarantine.IncidentGuard{Window: d.IncidentWindow, PerMinute: d.IncidentRate}
}

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
		Actor: t.Actor(), Owners: TokenOwners(t), DraftTTL: d.DraftTTL,
		MaxReplays: d.MaxReplays, Admin: t.Role == quarantine.RoleAdmin, Guard: d.Guard(), StartAt: in.StartAt,
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
		return req, ReplayField(err, "")
	}
	if c := req.Destination.Collector; c != "" && !slices.Contains(d.Collectors, c) {
		return req, quarantine.FieldErrorf(quarantine.EUNPROCESSABLE, "/destination/collector",
			"no collector named %q is configured", quarantine.Clip(c))
	}
	if err := d.DestinationAllowed(t, req.Destination); err != nil {
		return req, err
	}
	return req, nil
}

// ReplayProgress returns what the API computes from b at now: the achieved
// rate ((published + deduplicated) per second since it started, until it
// finished; nil before it starts) and the ETA in seconds (nil once it is
// terminal).
func ReplayProgress(b *quarantine.ReplayBatch, now time.Time) (achievedRate, etaSeconds *float64) {
	v := NewReplayView(b, now)
	return v.AchievedRate, v.ETASeconds
}

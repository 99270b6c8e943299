package rules

import (
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// ReplayView is a batch as the API and the UI show it (and as a replay
// report's first line has it): the stored batch, its
// observation as a duration string, and what the API computes from it.
type ReplayView struct {
	*quarantine.ReplayBatch
	Observe string `json:"observe"`
	// AchievedRate is (published + deduplicated) per second while the
	// batch was publishing (quarantine.AchievedRate); nil before it starts.
	AchievedRate *float64 `json:"achieved_rate"`
	// ETASeconds is how long the pending items still take at the batch's
	// rate (plus the canary's observation still to come); nil when the
	// batch is terminal.
	ETASeconds *float64 `json:"eta_seconds"`
	// PinETASeconds is, while the batch is pinning, how long the rest of
	// its pin takes at the pace so far; nil otherwise.
	PinETASeconds *float64 `json:"pin_eta_seconds"`
}

// NewReplayView returns b as shown at now. Counts gets every outcome.
func NewReplayView(b *quarantine.ReplayBatch, now time.Time) ReplayView {
	counts := make(map[quarantine.ItemOutcome]int, len(quarantine.ItemOutcomes))
	for _, o := range quarantine.ItemOutcomes {
		counts[o] = b.Counts[o]
	}
	c := *b
	c.Counts = counts
	if c.Queues == nil {
		c.Queues = []string{}
	}
	if c.Owners == nil {
		c.Owners = []string{}
	}
	out := ReplayView{ReplayBatch: &c, Observe: c.Observe.String()}
	out.AchievedRate = quarantine.AchievedRate(&c, nil, now) // pauses: see replayRate
	if !c.State.Terminal() {
		eta := EstimateSeconds(&c)
		if c.CanaryVerdict == quarantine.CanaryObserving && c.CanaryUntil != nil && c.CanaryUntil.After(now) {
			eta = roundSeconds(eta + c.CanaryUntil.Sub(now).Seconds())
		}
		out.ETASeconds = &eta
	}
	if left, ok := c.PinETA(now); ok {
		eta := roundSeconds(left.Seconds())
		out.PinETASeconds = &eta
	}
	return out
}

// SeesReplay reports whether t may see b: a token without owners sees
// every batch; one with owners the batches touching one of them, and
// those it created.
func SeesReplay(t *quarantine.Token, b *quarantine.ReplayBatch) bool {
	if len(t.Owners) == 0 || b.Actor == t.Actor() {
		return true
	}
	for _, o := range b.Owners {
		if t.Sees(o) {
			return true
		}
	}
	return false
}

// ActsOnReplay reports whether t's owners allow it to start, pause,
// resume or cancel b: every owner of b's messages must be one of t's (its
// role is checked apart: an operator at least).
func ActsOnReplay(t *quarantine.Token, b *quarantine.ReplayBatch) bool {
	for _, o := range b.Owners {
		if !t.Sees(o) {
			return false
		}
	}
	return true
}

// TokenOwners returns the owners t is limited to, nil for every owner
// (the store reads an empty, non-nil list as none).
func TokenOwners(t *quarantine.Token) []string {
	if len(t.Owners) == 0 {
		return nil
	}
	return slices.Clone(t.Owners)
}

// ReplayField turns the field of a domain error ("rate",
// "destination/collector") into a JSON Pointer below at. Unlike InBody it
// keeps the slashes: the domain names nested members that way.
func ReplayField(err error, at string) error {
	var e *quarantine.Error
	if !errors.As(err, &e) || e.Field == "" || strings.HasPrefix(e.Field, "/") {
		return err
	}
	c := *e
	c.Field = at + "/" + strings.ReplaceAll(e.Field, "~", "~0")
	return &c
}

// EstimateSeconds is how long the pending items of b take at its rate,
// plus the canary's observation when it has one still to come.
func EstimateSeconds(b *quarantine.ReplayBatch) float64 {
	est := 0.0
	if b.Rate > 0 {
		est = float64(b.Counts[quarantine.ItemPending]) / b.Rate
	}
	if b.Canary > 0 && b.CanaryVerdict == quarantine.CanaryPending {
		est += b.Observe.Seconds()
	}
	return roundSeconds(est)
}

// roundSeconds keeps a tenth of a second: estimates are not more exact.
func roundSeconds(v float64) float64 {
	return float64(int64(v*10+0.5)) / 10
}

// NonNilItems returns items with nil lists made empty (as JSON shows
// them: [] rather than null).
func NonNilItems(items []quarantine.ReplayItem) []quarantine.ReplayItem {
	if items == nil {
		return []quarantine.ReplayItem{}
	}
	for i := range items {
		if items[i].DroppedHeaders == nil {
			items[i].DroppedHeaders = []string{}
		}
	}
	return items
}

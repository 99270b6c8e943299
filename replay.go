package quarantine

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Audit actions of replays.
const (
	ActionReplayCreate = "replay.create" // a batch was created (draft or started), subject the batch id
	ActionReplayStart  = "replay.start"  // a draft was started
	ActionReplayPause  = "replay.pause"  // by an operator, or by the breaker (actor system)
	ActionReplayResume = "replay.resume"
	ActionReplayCancel = "replay.cancel"
	ActionReplayHalt   = "replay.halt"     // the canary failed (actor system)
	ActionReplayDone   = "replay.complete" // every item has an outcome (actor system)
	ActionReplayExpire = "replay.expire"   // a draft was not started in time (actor system)
	// ActionReplayForce records an override given with a reason: a message
	// without idempotency key, an incident guard, a key-rule change.
	ActionReplayForce = "replay.force"
)

// ReplayState is where a replay batch stands.
type ReplayState string

// The states of a replay batch.
const (
	// ReplayPinning: the set is being written, chunk by chunk; it becomes
	// a draft (a dry run) or running when every chunk is written, and
	// nothing can act on it before (see docs/replays-at-scale.md).
	ReplayPinning   ReplayState = "pinning"
	ReplayDraft     ReplayState = "draft"     // previewed: the set is pinned, nothing is published; it expires
	ReplayScheduled ReplayState = "scheduled" // pinned, nothing published until StartAt, when an engine starts it
	ReplayRunning   ReplayState = "running"   // the engine publishes its items
	ReplayPaused    ReplayState = "paused"    // by an operator, or by the breaker (StateReason says)
	ReplayHalted    ReplayState = "halted"    // the canary failed (StateReason says); resume overrides
	ReplayCompleted ReplayState = "completed" // every item has an outcome, and some reached the destination (or none had to)
	ReplayFailed    ReplayState = "failed"    // every item has an outcome, and every one that was tried failed: nothing reached the destination
	ReplayCancelled ReplayState = "cancelled" // pending items were skipped
	ReplayExpired   ReplayState = "expired"   // a draft nobody started in time
)

// ReplayStates lists every state.
var ReplayStates = []ReplayState{ReplayPinning, ReplayDraft, ReplayScheduled, ReplayRunning, ReplayPaused, ReplayHalted, ReplayCompleted, ReplayFailed, ReplayCancelled, ReplayExpired}

// Replay actions: what moves a batch from one state to another.
const (
	ReplayActStart    = "start"    // draft | scheduled -> running
	ReplayActPause    = "pause"    // running -> paused
	ReplayActResume   = "resume"   // paused | halted -> running
	ReplayActCancel   = "cancel"   // draft | scheduled | running | paused | halted -> cancelled
	ReplayActHalt     = "halt"     // running -> halted (the engine's canary)
	ReplayActComplete = "complete" // running -> completed or failed (the store, when no item is left: DoneState)
	ReplayActExpire   = "expire"   // draft -> expired
)

// replayTransitions says, per action, from which states it may be taken
// and the state it leads to.
var replayTransitions = map[string]struct {
	from []ReplayState
	to   ReplayState
	act  string // audit action
}{
	ReplayActStart:    {[]ReplayState{ReplayDraft, ReplayScheduled}, ReplayRunning, ActionReplayStart},
	ReplayActPause:    {[]ReplayState{ReplayRunning}, ReplayPaused, ActionReplayPause},
	ReplayActResume:   {[]ReplayState{ReplayPaused, ReplayHalted}, ReplayRunning, ActionReplayResume},
	ReplayActCancel:   {[]ReplayState{ReplayPinning, ReplayDraft, ReplayScheduled, ReplayRunning, ReplayPaused, ReplayHalted}, ReplayCancelled, ActionReplayCancel},
	ReplayActHalt:     {[]ReplayState{ReplayRunning}, ReplayHalted, ActionReplayHalt},
	ReplayActComplete: {[]ReplayState{ReplayRunning}, ReplayCompleted, ActionReplayDone},
	ReplayActExpire:   {[]ReplayState{ReplayDraft}, ReplayExpired, ActionReplayExpire},
}

// Valid reports whether s is a known state.
func (s ReplayState) Valid() bool {
	for _, k := range ReplayStates {
		if s == k {
			return true
		}
	}
	return false
}

// Terminal reports whether nothing more can happen to a batch in s.
func (s ReplayState) Terminal() bool {
	return s == ReplayCompleted || s == ReplayFailed || s == ReplayCancelled || s == ReplayExpired
}

// DoneState is the state a batch ends in once every item has an outcome:
// ReplayFailed when items failed and none was published (or found
// already done), else ReplayCompleted; with the reason to show, naming
// the failed count ("" when none failed).
func (b *ReplayBatch) DoneState() (ReplayState, string) {
	failed := b.Counts[ItemFailed]
	if failed == 0 {
		return ReplayCompleted, ""
	}
	if b.Counts[ItemPublished]+b.Counts[ItemDeduplicated] == 0 {
		return ReplayFailed, fmt.Sprintf("every item failed (%d of %d): nothing was published", failed, b.Total)
	}
	return ReplayCompleted, fmt.Sprintf("%d of %d items failed", failed, b.Total)
}

// ReplayTransition returns the state action leads to from s and the audit
// action recording it; EINVALID for an unknown action, ECONFLICT when s
// does not allow it.
func ReplayTransition(s ReplayState, action string) (ReplayState, string, error) {
	t, ok := replayTransitions[action]
	if !ok {
		return "", "", FieldErrorf(EINVALID, "action", "unknown replay action %q", truncateForError(action))
	}
	for _, f := range t.from {
		if f == s {
			return t.to, t.act, nil
		}
	}
	return "", "", Errorf(ECONFLICT, "a %s replay cannot be %s", s, pastTense(action))
}

func pastTense(action string) string {
	switch action {
	case ReplayActStart:
		return "started"
	case ReplayActPause:
		return "paused"
	case ReplayActResume:
		return "resumed"
	case ReplayActCancel:
		return "cancelled"
	case ReplayActHalt:
		return "halted"
	case ReplayActComplete:
		return "completed"
	}
	return "expired"
}

// ItemOutcome is what happened to one message of a replay batch.
type ItemOutcome string

// The outcomes of a replay item.
const (
	ItemPending      ItemOutcome = "pending"      // not published yet (it may be leased by an engine)
	ItemPublished    ItemOutcome = "published"    // the broker confirmed it
	ItemDeduplicated ItemOutcome = "deduplicated" // the broker said it already had it (NATS duplicate)
	ItemSkipped      ItemOutcome = "skipped"      // not published: Reason says why (status changed, cancelled, no key…)
	ItemFailed       ItemOutcome = "failed"       // the broker refused it (unroutable, no such queue…): Reason
	ItemRefailed     ItemOutcome = "refailed"     // published, then came back into the quarantine: RefailID
)

// ItemOutcomes lists every outcome.
var ItemOutcomes = []ItemOutcome{ItemPending, ItemPublished, ItemDeduplicated, ItemSkipped, ItemFailed, ItemRefailed}

// Valid reports whether o is a known outcome.
func (o ItemOutcome) Valid() bool {
	for _, k := range ItemOutcomes {
		if o == k {
			return true
		}
	}
	return false
}

// Canary verdicts.
const (
	CanaryNone      = ""          // no canary: canary 0, or a batch no larger than its canary
	CanaryPending   = "pending"   // its messages are not all published yet
	CanaryObserving = "observing" // published; waiting until CanaryUntil for re-failures
	CanaryPassed    = "passed"
	CanaryFailed    = "failed" // one of its messages re-failed: the batch halted
)

// ReplayDestination redirects a replay: another queue, and/or the broker of
// another configured collector. Zero fields keep the default (the message's
// own queue, through the broker it was collected from).
type ReplayDestination struct {
	Queue     string `json:"queue,omitempty"`
	Collector string `json:"collector,omitempty"`
}

// IsZero reports whether d keeps every default.
func (d ReplayDestination) IsZero() bool { return d.Queue == "" && d.Collector == "" }

// Limits of a replay request.
const (
	DefaultDraftTTL     = time.Hour
	MaxReplayObserve    = time.Hour
	DefaultReplayRate   = 10.0
	DefaultReplayMaxRat = 1000.0
)

// ReplayRequest creates a replay batch: exactly one of IDs or Filter
// selects the messages, pinned when the batch is created.
type ReplayRequest struct {
	IDs         []string
	Filter      *Filter
	ExpectCount *int
	Destination ReplayDestination
	// Rate is in messages per second; Burst the tokens the batch may use
	// at once (0: max(1, Rate/10)). Both are set by Validate's caller from
	// the configuration when zero.
	Rate  float64
	Burst int
	// Canary publishes the first Canary items, then waits Observe for any
	// of them to re-fail before publishing the rest.
	Canary  int
	Observe time.Duration
	// HaltRefailRatio pauses the batch when refailed/published passes it
	// (after MinBreakerSamples). 0 disables the breaker.
	HaltRefailRatio float64
	DryRun          bool
	// ForceWithoutKey replays messages that have no idempotency key.
	ForceWithoutKey bool
	// Force overrides the incident guard; AcceptKeyRuleChange replays
	// messages whose key rule changed since they were collected. Both are
	// audited with Reason.
	Force               bool
	AcceptKeyRuleChange bool
	Reason              string
	Actor               string
	// Owners limits the selection to these owners' messages (an
	// operator's token); nil means every owner.
	Owners []string
	// DraftTTL is how long a draft may wait to be started (0: DefaultDraftTTL).
	DraftTTL time.Duration
	// MaxReplays, when above 0, skips a message whose job was replayed
	// that many times already (ReplayCount) unless Admin: a job that keeps
	// coming back needs an admin's decision.
	MaxReplays int
	Admin      bool
	// Guard, when set, is the incident guard checked when the batch
	// starts (unless Force).
	Guard *IncidentGuard
	// ConfirmAbove, when above 0, is how many messages a batch created
	// and started at once may select without ExpectCount (the
	// confirmation of the previewed count); a dry run never needs it.
	ConfirmAbove int
	// OnPinning, when set, is called once with a copy of the batch when
	// a selection larger than one chunk is written in the pinning state,
	// before its chunks: a caller may answer with it while the pin goes
	// on (see store.PinAsync).
	OnPinning func(b *ReplayBatch)
	// StartAt, when set, schedules the batch: it is created pinned in
	// state scheduled, nothing is published, and an engine starts it at
	// StartAt (checking the incident guard then, with Force as given
	// here). Not with DryRun; at most MaxReplayDelay ahead.
	StartAt *time.Time
}

// DefaultConfirmAbove is the default of ReplayRequest.ConfirmAbove (and
// of the configuration key bulk.confirm_above).
const DefaultConfirmAbove = 10000

// MaxReplayDelay is how far ahead a replay may be scheduled.
const MaxReplayDelay = 30 * 24 * time.Hour

// MinBreakerSamples is how many published items the breaker waits for
// before it judges a batch's re-failure ratio.
const MinBreakerSamples = 10

// Validate checks r with the configured maximum rate (0: no maximum).
// Errors name the field.
func (r *ReplayRequest) Validate(maxRate float64) error {
	if err := validateReason(r.Reason); err != nil {
		return err
	}
	if (len(r.IDs) == 0) == (r.Filter == nil) {
		return FieldErrorf(EINVALID, "ids", "give either ids or a filter")
	}
	if len(r.IDs) > MaxBulk {
		return FieldErrorf(EINVALID, "ids", "at most %d ids at once", MaxBulk)
	}
	if r.Filter != nil {
		f := *r.Filter
		f.Limit = 1
		if err := f.Validate(); err != nil {
			return err
		}
	}
	if r.ExpectCount != nil && *r.ExpectCount < 0 {
		return FieldErrorf(EINVALID, "expect_count", "expect_count must not be negative")
	}
	if math.IsNaN(r.Rate) || math.IsInf(r.Rate, 0) || r.Rate <= 0 {
		return FieldErrorf(EINVALID, "rate", "rate must be a positive number of messages per second")
	}
	if maxRate > 0 && r.Rate > maxRate {
		return FieldErrorf(EUNPROCESSABLE, "rate", "rate %g is above the configured maximum of %g msg/s", r.Rate, maxRate)
	}
	if r.Burst < 0 || r.Burst > MaxBulk {
		return FieldErrorf(EINVALID, "burst", "burst must be between 0 and %d", MaxBulk)
	}
	if r.Burst == 0 {
		// A tenth of a second's worth, held to the bound an explicit
		// burst has (and an unbounded rate cannot overflow it).
		r.Burst = int(min(MaxBulk, max(1, math.Floor(r.Rate/10))))
	}
	if r.Canary < 0 || r.Canary > MaxBulk {
		return FieldErrorf(EINVALID, "canary", "canary must be between 0 and %d", MaxBulk)
	}
	if r.Observe < 0 || r.Observe > MaxReplayObserve {
		return FieldErrorf(EINVALID, "observe", "observe must be between 0s and %s", MaxReplayObserve)
	}
	if math.IsNaN(r.HaltRefailRatio) || r.HaltRefailRatio < 0 || r.HaltRefailRatio > 1 {
		return FieldErrorf(EINVALID, "halt_refail_ratio", "halt_refail_ratio must be between 0 and 1")
	}
	for _, s := range []struct{ name, v string }{{"destination/queue", r.Destination.Queue}, {"destination/collector", r.Destination.Collector}} {
		if err := validateText(s.name, s.v); err != nil {
			return err
		}
		if strings.TrimSpace(s.v) != s.v || strings.ContainsAny(s.v, "\r\n") {
			return FieldErrorf(EINVALID, s.name, "must be one line without surrounding spaces")
		}
	}
	if r.Actor == "" {
		return Errorf(EINTERNAL, "a replay needs an actor")
	}
	if r.DraftTTL == 0 {
		r.DraftTTL = DefaultDraftTTL
	}
	if r.StartAt != nil && r.DryRun {
		return FieldErrorf(EINVALID, "start_at", "a dry run is started by hand: give start_at or dry_run, not both")
	}
	return nil
}

// CheckStartAt checks r's StartAt at now: after now (to the microsecond,
// as stores keep it), at most MaxReplayDelay later (EUNPROCESSABLE naming
// start_at otherwise).
func (r *ReplayRequest) CheckStartAt(now time.Time) error {
	if r.StartAt == nil {
		return nil
	}
	if !r.StartAt.Truncate(time.Microsecond).After(now) {
		return FieldErrorf(EUNPROCESSABLE, "start_at", "start_at %s is not in the future", r.StartAt.UTC().Format(time.RFC3339))
	}
	if r.StartAt.Sub(now) > MaxReplayDelay {
		return FieldErrorf(EUNPROCESSABLE, "start_at", "start_at may be at most %s ahead", MaxReplayDelay)
	}
	return nil
}

// ReplayBatch is one replay: a pinned set of messages and how to publish
// them. Counts has one entry per outcome (zero included).
type ReplayBatch struct {
	ID              string            `json:"id"`
	State           ReplayState       `json:"state"`
	StateReason     string            `json:"state_reason"` // why it is paused, halted or cancelled
	Reason          string            `json:"reason"`
	Actor           string            `json:"actor"`
	Destination     ReplayDestination `json:"destination"`
	Rate            float64           `json:"rate"`
	Burst           int               `json:"burst"`
	Canary          int               `json:"canary"`
	Observe         time.Duration     `json:"-"`
	HaltRefailRatio float64           `json:"halt_refail_ratio"`
	ForceWithoutKey bool              `json:"force_without_key"`
	Queues          []string          `json:"queues"` // distinct queues of its messages
	Owners          []string          `json:"owners"` // distinct owners of its messages
	Total           int               `json:"total"`
	// PinTotal is how many items the batch holds once pinned, known when
	// the pin begins: while the batch is pinning, Total counts the items
	// written so far and reaches it.
	PinTotal      int                 `json:"pin_total"`
	Counts        map[ItemOutcome]int `json:"counts"`
	CanaryVerdict string              `json:"canary_verdict"`
	CanaryUntil   *time.Time          `json:"canary_until"`
	CreatedAt     time.Time           `json:"created_at"`
	UpdatedAt     time.Time           `json:"updated_at"`
	StartedAt     *time.Time          `json:"started_at"`
	FinishedAt    *time.Time          `json:"finished_at"`
	ExpiresAt     *time.Time          `json:"expires_at"` // drafts only
	// StartAt is when a scheduled batch starts (nil: not scheduled); it
	// stays once the batch started. StartForce: the request that
	// scheduled it overrode the incident guard (audited then), so its
	// start does too.
	StartAt    *time.Time `json:"start_at"`
	StartForce bool       `json:"-"`
}

// PinETA is how long the rest of b's pin takes at the pace so far (the
// items written since it was created), and false when b is not pinning.
// Before its first chunk is written it is unknown: 0, true.
func (b *ReplayBatch) PinETA(now time.Time) (time.Duration, bool) {
	if b.State != ReplayPinning {
		return 0, false
	}
	elapsed := now.Sub(b.CreatedAt)
	if b.Total <= 0 || elapsed <= 0 || b.PinTotal <= b.Total {
		return 0, true
	}
	return time.Duration(float64(elapsed) * float64(b.PinTotal-b.Total) / float64(b.Total)), true
}

// Done counts the items that have an outcome.
func (b *ReplayBatch) Done() int { return b.Total - b.Counts[ItemPending] }

// ReplayItem is one message of a batch, and what happened to it.
type ReplayItem struct {
	BatchID   string      `json:"batch_id"`
	Seq       int         `json:"seq"` // 0-based order of publication (canary first)
	MessageID string      `json:"message_id"`
	Queue     string      `json:"queue"` // the message's queue when pinned
	Outcome   ItemOutcome `json:"outcome"`
	// Reason says why the item failed or was skipped; while it is still
	// pending after a refusal, it is the destination's last refusal.
	Reason string `json:"reason"`
	// Destination says where it was published: kind, collector and queue,
	// like "rabbitmq:orders-rmq/orders".
	Destination    string   `json:"destination"`
	IdempotencyKey string   `json:"idempotency_key"`
	PayloadVersion int      `json:"payload_version"` // the version published
	PayloadSHA256  string   `json:"payload_sha256"`
	DroppedHeaders []string `json:"dropped_headers"` // redacted at ingest, so not sent
	Attempts       int      `json:"attempts"`        // leases taken (more than 1: republished after a lost lease, or retried after a refusal)
	// Refusals counts the times the destination refused the item for now
	// (a nack, a full queue, throttling): it is retried, backing off,
	// until the engine's publish attempts are spent, then it fails.
	Refusals    int        `json:"refusals"`
	RefailID    string     `json:"refail_id"` // the new entry, when it re-failed
	PublishedAt *time.Time `json:"published_at"`
	UpdatedAt   time.Time  `json:"updated_at"`
}

// ReplayLease is one item an engine leased to publish: the item, its
// message with the current payload, and the fencing token that must come
// back with the result. A result with an older token is refused.
type ReplayLease struct {
	Item    ReplayItem
	Message *Message
	Fence   int64
	// Refusal is set by an engine that gives the item back because the
	// destination refused it for now: the store counts it in the item's
	// Refusals and keeps it as the item's Reason.
	Refusal string
}

// ReplayResult is what an engine records for a leased item.
type ReplayResult struct {
	BatchID        string
	MessageID      string
	Fence          int64
	Outcome        ItemOutcome // published, deduplicated, failed or skipped
	Reason         string
	Destination    string
	PayloadVersion int
	PayloadSHA256  string
	DroppedHeaders []string
	At             time.Time
}

// ReplayChange moves a batch by an action, recorded by Actor with Reason.
type ReplayChange struct {
	BatchID string
	Action  string // ReplayActStart, …
	Actor   string
	Reason  string
	// Force, AcceptKeyRuleChange: as in ReplayRequest, for a start.
	Force               bool
	AcceptKeyRuleChange bool
	// Guard, when set, is the incident guard checked at a start.
	Guard *IncidentGuard
}

// Validate checks c.
func (c *ReplayChange) Validate() error {
	if _, ok := replayTransitions[c.Action]; !ok {
		return FieldErrorf(EINVALID, "action", "unknown replay action %q", truncateForError(c.Action))
	}
	if err := validateReason(c.Reason); err != nil {
		return err
	}
	if !ValidID(c.BatchID) {
		return Errorf(ENOTFOUND, "no such replay")
	}
	if c.Actor == "" {
		return Errorf(EINTERNAL, "a replay change needs an actor")
	}
	return nil
}

// ReplayFilter selects batches for a list, newest first by id.
type ReplayFilter struct {
	State []ReplayState
	Queue string
	Actor string
	// Owners limits the list to batches holding messages of these owners
	// (nil: all).
	Owners []string
	After  string // the id of the last batch of the previous page
	Limit  int
}

// Validate checks f and fills the default limit.
func (f *ReplayFilter) Validate() error {
	if err := pageLimit(&f.Limit); err != nil {
		return err
	}
	for _, s := range f.State {
		if !s.Valid() {
			return FieldErrorf(EINVALID, "state", "unknown replay state %q", truncateForError(string(s)))
		}
	}
	if f.After != "" && !ValidID(f.After) {
		return FieldErrorf(EINVALID, "cursor", "cursor is not one this server issued")
	}
	if err := validateText("queue", f.Queue); err != nil {
		return err
	}
	return validateText("actor", f.Actor)
}

// ReplayItemFilter selects the items of one batch, in Seq order.
type ReplayItemFilter struct {
	BatchID string
	Outcome []ItemOutcome
	After   int // the Seq of the last item of the previous page; -1 from the start
	Limit   int
}

// Validate checks f and fills the default limit.
func (f *ReplayItemFilter) Validate() error {
	if err := pageLimit(&f.Limit); err != nil {
		return err
	}
	for _, o := range f.Outcome {
		if !o.Valid() {
			return FieldErrorf(EINVALID, "outcome", "unknown outcome %q", truncateForError(string(o)))
		}
	}
	return nil
}

// RateBucket is a token bucket the store keeps, so that every engine
// sharing the database shares one budget: refilled at Rate tokens per
// second up to Burst.
type RateBucket struct {
	Key   string // "batch:<id>" or "dest:<destination>"
	Rate  float64
	Burst int
}

// ReplayCandidate is a message selected for a batch, as the store found it
// inside the transaction that locked it. Found is false for an ID that
// names no message (or one outside the request's owners).
type ReplayCandidate struct {
	ID             string
	Found          bool
	Status         Status
	Queue          string
	Owner          string
	IdempotencyKey string
	KeyRule        string
	ReplayCount    int
}

// KeyRuleEnvelope is the KeyRule of a key the message carried itself.
const KeyRuleEnvelope = "envelope"

// KeyRuleNone is the KeyRule of a message no rule applied to, collected
// before the default headers were looked at: it reads as KeyRuleDefault.
const KeyRuleNone = "none"

// KeyRuleDefault is the KeyRule of a message of a queue no rule matches:
// its key, if any, came from the usual headers (x-idempotency-key,
// idempotency-key, idempotency_key, any case).
const KeyRuleDefault = "default-headers"

// SameKeyRule reports whether two KeyRule descriptions name the same rule
// (KeyRuleNone and KeyRuleDefault are the same: no rule configured).
func SameKeyRule(a, b string) bool {
	norm := func(s string) string {
		if s == "" || s == KeyRuleNone {
			return KeyRuleDefault
		}
		return s
	}
	return norm(a) == norm(b)
}

// KeyRuleFunc returns the description of the idempotency rule configured
// now for queue (see Message.KeyRule).
type KeyRuleFunc func(queue string) string

// CheckCount checks the number of messages the selection matches
// (matched) against the request: with ExpectCount set, another count is
// ECONFLICT; without it, a batch started at once that matches more than
// ConfirmAbove is EUNPROCESSABLE. Both name expect_count, and nothing is
// created.
func (r *ReplayRequest) CheckCount(matched int) error {
	if r.ExpectCount != nil && *r.ExpectCount != matched {
		return FieldErrorf(ECONFLICT, "expect_count",
			"the selection matches %d messages now, not the %d expected; no replay was created", matched, *r.ExpectCount)
	}
	if r.ExpectCount == nil && !r.DryRun && r.ConfirmAbove > 0 && matched > r.ConfirmAbove {
		return ConfirmCountError(matched, r.ConfirmAbove, "replay")
	}
	return nil
}

// ConfirmCountError is the refusal of a bulk action (verb: "replay",
// "discard") that selects matched messages, more than above, without
// expect_count: EUNPROCESSABLE naming expect_count.
func ConfirmCountError(matched, above int, verb string) error {
	return FieldErrorf(EUNPROCESSABLE, "expect_count",
		"the selection matches %d messages, more than %d: preview it (dry run), then confirm by giving expect_count %d to %s them all",
		matched, above, matched, verb)
}

// Plan turns the selection of a new batch into its items, in the order
// given (Seq 0, 1, …): pending, or skipped with a reason. matched counts
// the messages found; CheckCount refuses it and nothing is created.
// keyRule may be nil (no drift check).
func (r *ReplayRequest) Plan(sel []ReplayCandidate, keyRule KeyRuleFunc) (items []ReplayItem, matched int, err error) {
	for _, c := range sel {
		if c.Found {
			matched++
		}
	}
	if err := r.CheckCount(matched); err != nil {
		return nil, matched, err
	}
	return r.PlanItems(sel, 0, keyRule), matched, nil
}

// PlanItems turns one chunk of the selection into its items, numbered
// from seq: pending, or skipped with a reason. keyRule may be nil.
func (r *ReplayRequest) PlanItems(sel []ReplayCandidate, seq int, keyRule KeyRuleFunc) []ReplayItem {
	items := make([]ReplayItem, 0, len(sel))
	for _, c := range sel {
		it := ReplayItem{Seq: seq + len(items), MessageID: c.ID, Queue: c.Queue, IdempotencyKey: c.IdempotencyKey, Outcome: ItemPending}
		it.Reason = r.skipReason(c, keyRule)
		if it.Reason != "" {
			it.Outcome = ItemSkipped
		}
		items = append(items, it)
	}
	return items
}

// skipReason says why c cannot be replayed by r, or "".
func (r *ReplayRequest) skipReason(c ReplayCandidate, keyRule KeyRuleFunc) string {
	switch {
	case !c.Found:
		return "not found"
	case c.Status != StatusQuarantined:
		return "the message is " + string(c.Status) + ", not quarantined"
	case c.IdempotencyKey == "" && !r.ForceWithoutKey:
		return "the message has no idempotency key: a repeat could not be recognised (force_without_key replays it anyway)"
	case r.MaxReplays > 0 && c.ReplayCount >= r.MaxReplays && !r.Admin:
		return fmt.Sprintf("this job was replayed %d times and came back failing each time: only an admin may replay it again", c.ReplayCount)
	}
	if keyRule != nil && !r.AcceptKeyRuleChange && c.KeyRule != "" && c.KeyRule != KeyRuleEnvelope {
		if now := keyRule(c.Queue); !SameKeyRule(now, c.KeyRule) {
			return "the idempotency key rule of queue " + c.Queue + " changed since collection (" +
				describeRule(c.KeyRule) + " then, " + describeRule(now) + " now): restore it, or accept_key_rule_change"
		}
	}
	return ""
}

// StartSkipReason says why a pending item of a draft cannot be started
// now that its message is in status st, or "".
func StartSkipReason(found bool, st Status) string {
	switch {
	case !found:
		return "the message no longer exists"
	case st != StatusQuarantined:
		return "the message became " + string(st) + " after the preview"
	}
	return ""
}

// LeaseSkipReason says why a leased item cannot be published now that its
// message is in status st, or "": a message discarded, or replayed (or
// being replayed) by another batch since the pin, is skipped. by is that
// other batch ("" when none is known): for a quarantined message, the
// batch whose item holds it in flight (leased, not yet recorded); for
// the others, also one that published it. A message replaying with no
// other holder is this very item's (a store of an older version moved a
// message to replaying when its item was leased).
func LeaseSkipReason(found bool, st Status, by string) string {
	switch {
	case !found:
		return "the message no longer exists"
	case st == StatusDiscarded:
		return "discarded"
	case by != "":
		return "replayed by batch " + by
	case st == StatusQuarantined || st == StatusReplaying:
		return ""
	}
	return "the message became " + string(st) + " after the pin"
}

func describeRule(r string) string {
	if r == "" {
		return KeyRuleNone
	}
	return r
}

// IncidentGuard refuses to start a batch larger than its canary while its
// queues are still receiving new dead letters: more than PerMinute per
// minute over the last Window, not counting the batch's own messages. The
// runbook: stabilise the dependency first, replay a small batch, check
// the queue's age, then continue.
type IncidentGuard struct {
	Window    time.Duration
	PerMinute float64
}

// Check returns ECONFLICT (field force) when a batch with pending items
// and canary must not start because of inflow (new dead letters per queue
// within the window, the batch's own excluded); nil otherwise.
func (g *IncidentGuard) Check(pending, canary int, force bool, inflow map[string]int) error {
	if g == nil || force || g.Window <= 0 || pending <= canary {
		return nil
	}
	minutes := g.Window.Minutes()
	queues := make([]string, 0, len(inflow))
	for q := range inflow {
		queues = append(queues, q)
	}
	slices.Sort(queues)
	for _, q := range queues {
		if n := inflow[q]; float64(n)/minutes > g.PerMinute {
			return FieldErrorf(ECONFLICT, "force",
				"queue %s received %d new dead letters in the last %s (above %g a minute): the incident is still producing failures. "+
					"Stabilise the dependency and replay at most the canary (%d) first, or give force with a reason",
				q, n, g.Window, g.PerMinute, canary)
		}
	}
	return nil
}

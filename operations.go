package quarantine

import (
	"strings"
	"time"
	"unicode/utf8"
)

// MaxEditReasonBytes caps the reason given for an edit or a discard.
const MaxEditReasonBytes = 2000

// PayloadEdit replaces the payload of one message. IfMatch is the
// payload_sha256 the editor saw: the store refuses the edit when the
// current payload differs (EPRECONDITION), so concurrent edits with the
// same IfMatch have exactly one winner. An edit that leaves the payload
// as it is is refused (see CheckCurrent).
type PayloadEdit struct {
	MessageID   string
	IfMatch     string
	Payload     []byte
	ContentType string // "" keeps the current one
	Reason      string
	Actor       string
}

// Validate checks the parts of an edit that need no stored state.
func (e *PayloadEdit) Validate() error {
	if err := validateReason(e.Reason); err != nil {
		return err
	}
	if len(e.IfMatch) != 64 || strings.Trim(e.IfMatch, "0123456789abcdef") != "" {
		return FieldErrorf(EINVALID, "If-Match", `If-Match must be the quoted payload_sha256 of the current payload, like "9f86d0…"`)
	}
	if e.Actor == "" {
		return Errorf(EINTERNAL, "an edit needs an actor")
	}
	return nil
}

// CheckCurrent checks the edit against sha, the SHA-256 of the message's
// current payload: EPRECONDITION when e.IfMatch is not sha (the payload
// changed since it was read), EUNPROCESSABLE naming /payload when the new
// payload is the current one. A no-op edit is refused rather than
// recorded: it would add a version whose hash (the ETag) equals the
// previous one, so a second edit with the same If-Match would win too.
// Stores call it inside the transaction that writes the edit.
func (e *PayloadEdit) CheckCurrent(sha string) error {
	if sha != e.IfMatch {
		return Errorf(EPRECONDITION, "the payload changed: its SHA-256 is no longer %s", e.IfMatch)
	}
	if PayloadHash(e.Payload) == sha {
		return FieldErrorf(EUNPROCESSABLE, "/payload", "the payload is unchanged: an edit must change it")
	}
	return nil
}

func validateReason(r string) error {
	switch {
	case strings.TrimSpace(r) == "":
		return FieldErrorf(EUNPROCESSABLE, "reason", "a reason is required")
	case len(r) > MaxEditReasonBytes:
		return FieldErrorf(EUNPROCESSABLE, "reason", "reason is longer than %d bytes", MaxEditReasonBytes)
	case !utf8.ValidString(r) || strings.ContainsRune(r, 0):
		return FieldErrorf(EINVALID, "reason", "reason must be valid UTF-8 without NUL")
	}
	return nil
}

// MaxBulk caps how many messages one bulk action may change.
const MaxBulk = 10000

// Discard gives up on messages: by IDs, or by a filter. Nothing is
// deleted; each message becomes discarded and gets its own audit event.
// ExpectCount, when set, pins the action to what the operator previewed:
// if the filter now matches another number of messages, nothing changes
// (ECONFLICT). Messages that cannot be discarded (already discarded,
// being replayed) are skipped and reported.
type Discard struct {
	IDs         []string
	Filter      *Filter
	ExpectCount *int
	Reason      string
	Actor       string
}

// Validate checks d.
func (d *Discard) Validate() error {
	if err := validateReason(d.Reason); err != nil {
		return err
	}
	if (len(d.IDs) == 0) == (d.Filter == nil) {
		return FieldErrorf(EINVALID, "ids", "give either ids or a filter")
	}
	if len(d.IDs) > MaxBulk {
		return FieldErrorf(EINVALID, "ids", "at most %d ids at once", MaxBulk)
	}
	if d.Filter != nil {
		f := *d.Filter
		f.Limit = 1
		if err := f.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// BulkResult reports a bulk action: which messages changed, and which
// were skipped and why.
type BulkResult struct {
	Matched int           `json:"matched"`
	Changed []string      `json:"changed"`
	Skipped []BulkSkipped `json:"skipped"`
}

// BulkSkipped is a message a bulk action left alone.
type BulkSkipped struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

// Stratification of a sample.
const (
	StratifyNone        = "none"
	StratifyFingerprint = "fingerprint"
	StratifyQueue       = "queue"
)

// MaxSample caps a sample's size.
const MaxSample = 1000

// SampleRequest asks for a uniformly random sample of the messages
// matching Filter (its cursor and limit ignored). The same Seed over the
// same set gives the same sample. With StratifyBy fingerprint or queue,
// every group of the set is represented (as far as Size allows: one per
// group first, the rest in proportion to the groups' sizes).
type SampleRequest struct {
	Filter     Filter
	Size       int
	StratifyBy string
	Seed       int64
}

// Validate checks r and fills defaults.
func (r *SampleRequest) Validate() error {
	if r.Size == 0 {
		r.Size = 10
	}
	if r.Size < 1 || r.Size > MaxSample {
		return FieldErrorf(EINVALID, "size", "size must be between 1 and %d", MaxSample)
	}
	switch r.StratifyBy {
	case "":
		r.StratifyBy = StratifyNone
	case StratifyNone, StratifyFingerprint, StratifyQueue:
	default:
		return FieldErrorf(EINVALID, "stratify_by", "stratify_by must be none, fingerprint or queue")
	}
	f := r.Filter
	f.Limit = 1
	return f.Validate()
}

// Group is a failure group: messages sharing a fingerprint.
type Group struct {
	Fingerprint   string       `json:"fingerprint"`
	JobName       string       `json:"job_name"`
	FailureClass  FailureClass `json:"failure_class"`
	Reason        string       `json:"reason"` // the normalised reason
	Count         int64        `json:"count"`
	FirstFailedAt time.Time    `json:"first_failed_at"`
	LastFailedAt  time.Time    `json:"last_failed_at"`
	Queues        []string     `json:"queues"`
	ExampleID     string       `json:"example_id"`
}

// QueueStats describes one queue for its owner.
type QueueStats struct {
	Queue  string           `json:"queue"`
	Owner  string           `json:"owner"`
	Counts map[Status]int64 `json:"counts"`
	// OldestQuarantinedAt is the failed_at of the oldest quarantined
	// message; nil when none is quarantined.
	OldestQuarantinedAt *time.Time `json:"oldest_quarantined_at"`
	OldestID            string     `json:"oldest_id,omitempty"`
	// Inflow counts messages collected in the last 5 minutes, hour, day.
	Inflow5m  int64 `json:"inflow_5m"`
	Inflow1h  int64 `json:"inflow_1h"`
	Inflow24h int64 `json:"inflow_24h"`
}

// PurgeResult reports a retention purge.
type PurgeResult struct {
	Purged []string `json:"purged"` // ids whose payloads were removed
}

// Selected is one message a bulk action selected, as the store found it
// inside its transaction. Found is false for an ID that names no message.
// HeldBy is the replay batch whose item holds the message in flight
// (leased, its outcome not yet recorded), or "": such a message cannot
// be discarded, whatever its status.
type Selected struct {
	ID     string
	Status Status
	Found  bool
	HeldBy string
}

// Plan decides what d does to the selected messages: the result, and one
// message.discard audit event per message that changes, and one
// message.discard_refused per message whose status or replay forbids it
// (held by a replay in flight: the loser of a race is recorded too). With ExpectCount
// set, a selection of another size is ECONFLICT and nothing changes.
// Stores call it inside the transaction that locked the selection, then
// apply the result and append the events.
func (d *Discard) Plan(sel []Selected) (BulkResult, []*AuditEvent, error) {
	return d.plan(sel, false)
}

// plan is Plan; with chunk, the changes get no event each (PlanChunk
// records them in one).
func (d *Discard) plan(sel []Selected, chunk bool) (BulkResult, []*AuditEvent, error) {
	res := BulkResult{Changed: []string{}, Skipped: []BulkSkipped{}}
	for _, m := range sel {
		if m.Found {
			res.Matched++
		}
	}
	if d.ExpectCount != nil && *d.ExpectCount != res.Matched {
		return res, nil, FieldErrorf(ECONFLICT, "expect_count",
			"the selection matches %d messages now, not the %d expected; nothing was discarded", res.Matched, *d.ExpectCount)
	}
	var events []*AuditEvent
	for _, m := range sel {
		if reason := m.skipReason(StatusDiscarded); reason != "" {
			res.Skipped = append(res.Skipped, BulkSkipped{ID: m.ID, Reason: reason})
			if m.Found && m.Status != StatusDiscarded {
				// Refused by the message's state (a replay holds it): the
				// attempt is recorded too, not only the winner.
				ev := NewAuditEvent(d.Actor, ActionDiscardRefused, m.ID, map[string]string{
					"reason": d.Reason, "status": string(m.Status), "refused": reason,
				})
				events = append(events, &ev)
			}
			continue
		}
		res.Changed = append(res.Changed, m.ID)
		if chunk {
			continue
		}
		ev := NewAuditEvent(d.Actor, ActionDiscard, m.ID, map[string]string{
			"reason": d.Reason, "previous_status": string(m.Status),
		})
		events = append(events, &ev)
	}
	return res, events, nil
}

// skipReason says why m cannot become next, or "" when it can.
func (m Selected) skipReason(next Status) string {
	switch {
	case !m.Found:
		return "not found"
	case m.Status == next:
		return "already " + string(next)
	case m.HeldBy != "":
		return "the message is being replayed by batch " + m.HeldBy
	}
	if err := m.Status.Transition(next); err != nil {
		return ErrorMessage(err)
	}
	return ""
}
